# gpuwatch probe: the request side. Standard library only, Python 3.6+.
#
# Shipped inside the probe bundle as the module "dispatch". The agent keeps the sampling loop;
# this module reads requests on stdin and answers them (the framing is described in ops_base):
#   want, interval, ping    handled at once on the reading thread, as the sampler's settings
#   any other op            looked up in the merged OPS tables of the shipped ops_*.py modules
#                           and run on a thread of its own, so a slow op never delays a sample
# Whatever a request does wrong (unknown op, bad arguments, an op that raises) it gets an error
# reply; the probe itself never dies of a request.
import json
import threading
import time

from ops_base import OpError

# Sampler settings, answered on the reading thread (cheap, and their order matters).
BUILTIN_OPS = ("want", "interval", "ping")
# More requests than this running at once are refused, not queued: each holds a thread.
MAX_IN_FLIGHT = 64


def load_ops(import_module, module_names):
    """Merge the OPS tables of the named modules: ({op: handler}, {module: why it was skipped}).

    One broken op module (an import error on an old Python, a duplicate op name) costs only its
    own ops: the others still load, and the reason is reported in the probe's hello."""
    ops = {}
    errors = {}
    for name in sorted(module_names):
        try:
            table = getattr(import_module(name), "OPS")
            if not isinstance(table, dict):
                raise TypeError("OPS is %s, not a dict" % type(table).__name__)
        except Exception as exc:
            errors[name] = "%s: %s" % (type(exc).__name__, exc)
            continue
        for op, handler in sorted(table.items()):
            if op in BUILTIN_OPS or op in ops:
                errors[name] = "op %r is defined twice; this one is ignored" % op
            elif not callable(handler):
                errors[name] = "op %r has no callable handler" % op
            else:
                ops[op] = handler
    return ops, errors


class Dispatcher(object):
    """Reads requests and answers them; the sampler only sees its settings change."""

    def __init__(self, sampler, emit, ops, op_errors=None):
        self.sampler = sampler  # has set_wants(request), set_interval(seconds)
        self.emit = emit  # writes one frame, whole, under the probe's output lock
        self.ops = ops
        self.op_errors = op_errors or {}
        self.in_flight = 0
        self.lock = threading.Lock()

    def read_requests(self, stream, on_input, on_eof):
        """Forever: one JSON request per line. on_input() on every line; on_eof() when stdin closes."""
        while True:
            line = stream.readline()
            if not line:
                on_eof()  # the client is gone: so are we
                return
            on_input()
            try:
                req = json.loads(line.decode("utf-8"))
            except ValueError as exc:
                self.emit({"type": "error", "error": "bad request: %s" % exc})
                continue
            if not isinstance(req, dict):
                self.emit({"type": "error", "error": "bad request: not a JSON object"})
                continue
            try:
                self.handle(req)
            except Exception as exc:  # a bug here must not stop the reading thread
                self.emit({"type": "error", "error": "request failed: %s: %s" % (type(exc).__name__, exc)})

    def handle(self, req):
        op = req.get("op")
        rid = req.get("id")
        if op == "ping":
            self.emit({"type": "pong", "id": rid, "t": time.time()})
            return
        if op in ("want", "interval"):
            try:
                if op == "want":
                    self.sampler.set_wants(req)
                else:
                    self.sampler.set_interval(float(req["seconds"]))
            except (KeyError, TypeError, ValueError) as exc:
                self._refuse(rid, op, "bad-args", "%s: %s" % (op, exc))
                return
            if rid is not None:
                self.reply(rid, {})
            return
        if isinstance(rid, bool) or not isinstance(rid, int):
            # Without an id an answer could not be matched: say so as a plain error frame.
            self.emit({"type": "error", "error": "request %r has no integer id" % (op,)})
            return
        handler = self.ops.get(op)
        if handler is None:
            known = ", ".join(sorted(self.ops) + list(BUILTIN_OPS))
            words = "unknown op %r (this probe knows: %s)" % (op, known)
            if self.op_errors:
                words += "; op modules not loaded: " + "; ".join(
                    "%s (%s)" % item for item in sorted(self.op_errors.items()))
            self.reply_error(rid, "unknown-op", words)
            return
        args = req.get("args", {})
        if not isinstance(args, dict):
            self.reply_error(rid, "bad-args", "args of %r must be an object" % op)
            return
        with self.lock:
            if self.in_flight >= MAX_IN_FLIGHT:
                busy = True
            else:
                busy = False
                self.in_flight += 1
        if busy:
            self.reply_error(rid, "busy", "%d requests are already running on this host" % MAX_IN_FLIGHT)
            return
        worker = threading.Thread(target=self._run, args=(rid, op, handler, args), name="op-%s-%d" % (op, rid))
        worker.daemon = True
        worker.start()

    def _run(self, rid, op, handler, args):
        try:
            try:
                result = handler(args)
            except OpError as exc:
                self.reply_error(rid, exc.code, exc.message)
                return
            except Exception as exc:
                self.reply_error(rid, "internal", "%s failed: %s: %s" % (op, type(exc).__name__, exc))
                return
            try:
                self.reply(rid, result if result is not None else {})
            except (TypeError, ValueError) as exc:  # a result json cannot carry
                self.reply_error(rid, "internal", "%s returned what cannot be sent: %s" % (op, exc))
        finally:
            with self.lock:
                self.in_flight -= 1

    def reply(self, rid, result):
        self.emit({"type": "reply", "id": rid, "ok": True, "result": result})

    def reply_error(self, rid, code, message):
        self.emit({"type": "reply", "id": rid, "ok": False, "error": {"code": code, "message": message}})

    def _refuse(self, rid, op, code, message):
        if rid is not None:
            self.reply_error(rid, code, message)
        else:
            self.emit({"type": "error", "error": message})
