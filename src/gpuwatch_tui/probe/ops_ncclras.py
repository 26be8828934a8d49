# gpuwatch probe ops: NCCL's RAS service. Standard library only, Python 3.6+, Linux.
#
# nccl_ras  ask the RAS service of NCCL >= 2.24 on this host (127.0.0.1:28028 unless a target's
#           NCCL_RAS_ADDR names another loopback address) for its VERBOSE STATUS: the job's ranks,
#           their collective counts, and the ranks that do not answer or are dead. No `ncclras`
#           binary is needed: the protocol is plain text over TCP.
#
# The protocol (NCCL's src/ras/client_support.cc): the client speaks first, "CLIENT PROTOCOL 2\n";
# the server answers "SERVER PROTOCOL 2\n". "SET FORMAT json\n" is answered "OK\n" by versions that
# speak JSON. "VERBOSE STATUS\n" gets the report, after which the server closes the connection.
import socket
import time

from ops_base import OpError, check_ref
from ops_flightrec import read_environ

DEFAULT_ADDR = ("127.0.0.1", 28028)
MAX_REPORT_BYTES = 4 * 1024 * 1024
LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def ras_address(env):
    """(host, port) from NCCL_RAS_ADDR, only where it is a loopback address: the service is the host's own."""
    value = (env or {}).get("NCCL_RAS_ADDR", "").strip()
    if not value:
        return DEFAULT_ADDR
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not (host.startswith(LOOPBACK) or host in ("localhost", "::1")):
        raise OpError("refused", "NCCL_RAS_ADDR=%s is not a loopback address: not asked" % value[:80])
    try:
        return host, int(port)
    except ValueError:
        raise OpError("bad-addr", "NCCL_RAS_ADDR=%s has no port" % value[:80])


def uses_nccl(pid):
    try:
        with open("/proc/%d/maps" % pid, "rb") as f:
            return any(b"libnccl" in line for line in f)
    except (OSError, IOError):
        return None  # unreadable: try anyway


class Conn(object):
    def __init__(self, addr, timeout_s):
        self.deadline = time.time() + timeout_s
        try:
            self.sock = socket.create_connection(addr, timeout=min(timeout_s, 5.0))
        except socket.timeout:
            raise OpError("timeout", "no connection to NCCL RAS at %s:%d" % addr)
        except OSError as exc:
            raise OpError("no-service", "no NCCL RAS service at %s:%d (%s)" % (addr[0], addr[1], exc.strerror or exc))
        self.buf = b""

    def left(self):
        return max(0.05, self.deadline - time.time())

    def send(self, line):
        self.sock.sendall(line.encode() + b"\n")

    def line(self, what):
        while b"\n" not in self.buf:
            if len(self.buf) > 4096:
                raise OpError("bad-reply", "RAS sent a line of over 4 KiB while %s" % what)
            self.sock.settimeout(self.left())
            try:
                chunk = self.sock.recv(4096)
            except socket.timeout:
                raise OpError("no-answer", "RAS accepted the connection but did not answer while %s: the process "
                                           "serving it may be stopped or wedged" % what)
            if not chunk:
                raise OpError("closed", "RAS closed the connection while %s" % what)
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", "replace")

    def rest(self):
        chunks, size = [self.buf], len(self.buf)
        while size < MAX_REPORT_BYTES:
            self.sock.settimeout(self.left())
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise OpError("no-answer", "RAS did not finish its report in time (%d bytes so far): a rank "
                                           "it asked may not answer" % size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)[:MAX_REPORT_BYTES].decode("utf-8", "replace"), size >= MAX_REPORT_BYTES

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def ask(addr, timeout_s, json_format):
    conn = Conn(addr, timeout_s)
    try:
        conn.send("CLIENT PROTOCOL 2")
        hello = conn.line("greeting")
        if not hello.startswith("SERVER PROTOCOL"):
            raise OpError("bad-reply", "not an NCCL RAS service at %s:%d (it said %r)" % (addr[0], addr[1],
                                                                                         hello[:80]))
        if json_format:
            conn.send("SET FORMAT json")
            if conn.line("setting the format").strip() != "OK":
                return None  # an NCCL without JSON output: ask again in text
        conn.send("VERBOSE STATUS")
        report, cut = conn.rest()
        return {"format": "json" if json_format else "text", "report": report, "truncated": cut,
                "server": hello.strip()[:80]}
    finally:
        conn.close()


def op_nccl_ras(args):
    timeout_s = min(max(float(args.get("timeout_s", 15.0)), 0.5), 120.0)
    env = None
    checked = []
    for t in (args.get("targets") or [])[:64]:
        pid = int(t["pid"])
        check_ref(pid, int(t["start_ticks"]))
        checked.append(uses_nccl(pid))
        env = env or read_environ(pid)
    if env is not None and env.get("NCCL_RAS_ENABLE", "1").strip() == "0":
        raise OpError("disabled", "the job sets NCCL_RAS_ENABLE=0: no RAS service")
    # a job that names its RAS address is asked there even before libnccl shows in its maps
    if checked and not any(c is None or c for c in checked) and "NCCL_RAS_ADDR" not in (env or {}):
        raise OpError("not-nccl", "no process of the job has libnccl loaded")
    addr = ras_address(env)
    started = time.time()
    answer = ask(addr, timeout_s, json_format=True) or ask(addr, timeout_s, json_format=False)
    answer.update(addr="%s:%d" % addr, took_s=round(time.time() - started, 3))
    return answer


OPS = {"nccl_ras": op_nccl_ras}
