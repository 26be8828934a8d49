# gpuwatch probe: the nvidia-smi GPU source: two long-running `nvidia-smi ... -lms N` streams.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "gpu_smi".
import os
import signal
import subprocess
import threading
import time

import gpu_metrics
from gpu_proc_util import KEEP_S as PMON_KEEP_S, PMON_EVERY_S, parse_pmon
from output import CHILDREN


# The query: index, uuid, name, each metric of the table that names an nvidia-smi field, the driver last.
SMI_METRICS = tuple(m.name for m in gpu_metrics.SMI_METRICS)
# The table's readings nvidia-smi has no field for (GPM's): sent as None, so every reading is a key
NOT_IN_SMI = tuple((name, None) for name in gpu_metrics.READINGS if name not in SMI_METRICS)
SMI_FIELDS = "index,uuid,name,%s,driver_version" % ",".join(m.smi for m in gpu_metrics.SMI_METRICS)
SMI_APP_FIELDS = "timestamp,gpu_uuid,pid,used_memory"


def _f(text):
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Unknown Error"):
        return None  # "[N/A]", "[Not Supported]"
    try:
        return float(text)
    except ValueError:
        return None


def _find_prctl():
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


# Looked up here, in the parent: after fork, with reader threads running, the child must not
# import anything (the import lock may be held by a thread that no longer exists there).
_PRCTL = _find_prctl()


def die_with_parent():
    """In the child: get SIGTERM when the probe dies, even by SIGKILL. An idle `-lms` stream
    writes nothing, so it would never get SIGPIPE and would outlive us."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(1)  # the probe died before prctl took effect


def end_child(proc):
    """Kill and reap an nvidia-smi child, and stop counting it among the probe's children."""
    try:
        proc.kill()
        proc.wait()
    except Exception:
        pass
    if proc in CHILDREN:
        CHILDREN.remove(proc)


class SmiStream(object):
    """One long-running `nvidia-smi ... -lms N` whose latest lines are kept by a thread."""

    def __init__(self, exe, query, interval_ms):
        args = [exe, query, "--format=csv,noheader,nounits", "-lms", str(int(interval_ms))]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     preexec_fn=die_with_parent,
                                     stderr=subprocess.PIPE, close_fds=True)
        CHILDREN.append(self.proc)
        self.last_line_at = time.time()
        self.lines = []  # (arrival time, fields)
        self.lock = threading.Lock()
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        # Whole reads, not a line at a time: nvidia-smi writes a tick's lines together, so the
        # thread wakes once a tick rather than once a GPU.
        fd = self.proc.stdout.fileno()
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                chunk = b"\n" if pending else b""  # a last line without its newline still counts
                if not chunk:
                    break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            if not lines:
                continue
            parsed = [[f.strip() for f in raw.decode("utf-8", "replace").split(",")] for raw in lines]
            now = time.time()
            with self.lock:
                self.last_line_at = now
                self.lines.extend((now, fields) for fields in parsed)
                if len(self.lines) > 4096:
                    del self.lines[:2048]

    def _read_err(self):
        self.stderr = self.proc.stderr.read(4096)

    def take(self):
        with self.lock:
            lines, self.lines = self.lines, []
        return lines

    def close(self):
        end_child(self.proc)


class Pmon(object):
    """One `nvidia-smi pmon -c 1 -s u` run in the background: each process's SM % on each GPU. Its output is
    read by a thread; `figures()` is None until it has ended, then {GPU index: {pid: SM %}}."""

    TIMEOUT_S = 10.0

    def __init__(self, exe):
        self.started = time.time()
        self.out = None
        self.proc = subprocess.Popen([exe, "pmon", "-c", "1", "-s", "u"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent, close_fds=True)
        CHILDREN.append(self.proc)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        text = self.proc.stdout.read(262144).decode("utf-8", "replace")
        while self.proc.stdout.read(65536):  # (more than a host's processes print: drained, not kept)
            pass
        self.proc.wait()
        self.out = parse_pmon(text) if self.proc.returncode == 0 else {}

    def figures(self):
        if self.out is None and time.time() - self.started > self.TIMEOUT_S:
            self.close()
            return {}
        return self.out

    def close(self):
        end_child(self.proc)


class SmiSource(object):
    name = "nvidia-smi"

    def __init__(self, exe, interval):
        self.driver = None
        self.exe = exe
        self.interval_ms = max(100, int(interval * 1000))
        self.error = None
        self.gpus = {}
        self.apps = []
        self.apps_at = 0.0
        self.restart_delay = 5.0
        self.last_message = ""  # the last line of nvidia-smi that was not a reading (its own error)
        self.restart_at = None
        # Per-process SM % of shared GPUs (`nvidia-smi pmon`): the run under way, its last figures and when.
        self.pmon = None
        self.pmon_at = -PMON_EVERY_S
        self.pmon_figures = ({}, 0.0)
        self.pmon_works = True
        self._start_streams()

    def _start_streams(self):
        self.gpu_stream = SmiStream(self.exe, "--query-gpu=" + SMI_FIELDS, self.interval_ms)
        self.app_stream = SmiStream(self.exe, "--query-compute-apps=" + SMI_APP_FIELDS, self.interval_ms)

    def _restart_if_due(self):
        """A driver reset or a crashed nvidia-smi should not need a reconnect: try again, backing off."""
        now = time.time()
        if self.restart_at is None:
            self.restart_at = now + self.restart_delay
            self.restart_delay = min(60.0, self.restart_delay * 2)
        elif now >= self.restart_at:
            self.close()
            self.restart_at = None
            self._start_streams()

    def check_started(self, wait=2.0):
        """Raise if nvidia-smi dies at once (no driver, no devices)."""
        deadline = time.time() + wait
        while time.time() < deadline:
            if self.gpu_stream.lines:
                return
            code = self.gpu_stream.proc.poll()
            if code is not None:
                time.sleep(0.05)
                msg = (self.gpu_stream.stderr or b"").decode("utf-8", "replace").strip()
                out = " ".join(f for _, fs in self.gpu_stream.take() for f in fs)
                raise RuntimeError("nvidia-smi exited %d: %s" % (code, (msg or out)[:300]))
            time.sleep(0.02)

    def sample(self):
        last = 3 + len(SMI_METRICS)  # the driver version's field
        for _, f in self.gpu_stream.take():
            if len(f) < last:
                # nvidia-smi prints its own failure ("...couldn't communicate with the NVIDIA driver")
                # on stdout, not stderr: keep the last such line (bounded) for the error below.
                self.last_message = ", ".join(f)[:300]
                continue
            try:
                index = int(f[0])
            except ValueError:
                continue
            gpu = {"index": index, "uuid": f[1], "name": f[2]}
            gpu.update(NOT_IN_SMI)
            for name, text in zip(SMI_METRICS, f[3:last]):
                gpu[name] = _f(text)  # "[N/A]" (a field this GPU does not report): None
            self.gpus[index] = gpu
            if len(f) > last and f[last] and not f[last].startswith("["):  # "[N/A]" is no version
                self.driver = f[last]
        batch = self.app_stream.take()
        if batch:
            # Lines of one tick share a timestamp: keep the newest tick only.
            newest = batch[-1][1][0]
            self.apps = [fs for _, fs in batch if fs and fs[0] == newest and len(fs) >= 4]
            self.apps_at = batch[-1][0]
        elif time.time() - self.apps_at > 2.5 * self.interval_ms / 1000.0:
            self.apps = []  # nvidia-smi prints nothing for a tick with no compute apps
        # Never repeat the last numbers as if live: a dead or silent nvidia-smi is an error.
        code = self.gpu_stream.proc.poll()
        if code is not None:
            self.gpus = {}
            self._restart_if_due()
            msg = (self.gpu_stream.stderr or b"").decode("utf-8", "replace").strip() or self.last_message
            raise RuntimeError("nvidia-smi exited %d%s" % (code, (": " + msg[:300]) if msg else ""))
        silent = time.time() - self.gpu_stream.last_line_at
        if silent > max(3.0, 5 * self.interval_ms / 1000.0):
            self.gpus = {}
            self._restart_if_due()
            raise RuntimeError("nvidia-smi: no output for %.0fs" % silent)
        self.restart_delay = 5.0  # healthy again
        out = []
        for index in sorted(self.gpus):
            g = dict(self.gpus[index])
            g["processes"] = []
            for fs in self.apps:
                if fs[1] == g["uuid"]:
                    try:
                        g["processes"].append({"pid": int(fs[2]), "mem_used_mib": _f(fs[3])})
                    except ValueError:
                        pass
            out.append(g)
        self._per_process(out)
        return out

    def _per_process(self, gpus):
        """Each process's SM % on a GPU with more than one, from the last pmon run (started here, at most
        every PMON_EVERY_S, while some GPU is shared)."""
        shared = [g for g in gpus if len(g["processes"]) > 1]
        for g in gpus:
            for p in g["processes"]:
                p["sm_pct"] = None
        now = time.time()
        if self.pmon is not None:
            got = self.pmon.figures()
            if got is not None:
                if not got and self.pmon.proc.returncode not in (0, None):
                    self.pmon_works = False  # this nvidia-smi has no pmon: not asked again
                self.pmon.close()
                self.pmon = None
                self.pmon_figures = (got, now)
        elif shared and self.pmon_works and now - self.pmon_at >= PMON_EVERY_S:
            self.pmon_at = now
            try:
                self.pmon = Pmon(self.exe)
            except Exception:
                self.pmon_works = False
        figures, at = self.pmon_figures
        if now - at > PMON_KEEP_S:
            return
        for g in shared:
            sm = figures.get(g["index"])
            if sm is None:
                continue
            for p in g["processes"]:
                p["sm_pct"] = sm.get(p["pid"])

    def close(self):
        if self.pmon is not None:
            self.pmon.close()
        self.gpu_stream.close()
        self.app_stream.close()
