"""Capture NCCL RAS reports and PyTorch flight-recorder dumps on a one-GPU machine.

Scenario 1: one process, a 1-rank NCCL communicator (RAS VERBOSE STATUS, pipe-triggered FR dump).
Scenario 2: two processes both on GPU 0 (if NCCL allows it): rank 1 stops calling collectives, rank 0 hangs in
all_reduce; RAS reports while hung, after SIGSTOP of rank 1, after SIGKILL of rank 1; FR dumps of both ranks.
Everything lands in OUTDIR/capture.tar.gz (first argument) with a log.
"""
import json, os, signal, socket, subprocess, sys, tarfile, time

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
WORK = "/tmp/cap"
os.makedirs(WORK, exist_ok=True)
LOG = open(os.path.join(WORK, "capture.log"), "w")


def log(*a):
    line = "[%.1f] %s" % (time.time() - T0, " ".join(str(x) for x in a))
    print(line, flush=True)
    LOG.write(line + "\n")
    LOG.flush()


T0 = time.time()

RANK_SRC = r'''
import os, sys, time, datetime, pickle
import torch, torch.distributed as dist
rank, world, mode, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=400),
                        device_id=torch.device("cuda:0"))
x = torch.ones(1024, device="cuda")
for i in range(5):
    dist.all_reduce(x)
dist.broadcast(x, 0)
dist.barrier()
torch.cuda.synchronize()
c = torch._C._distributed_c10d
for name in ("_dump_nccl_trace", "_dump_nccl_trace_json", "_dump_fr_trace", "_dump_fr_trace_json"):
    f = getattr(c, name, None)
    if f is None:
        continue
    try:
        data = f()
        if isinstance(data, str):
            data = data.encode()
        open("%s/inproc_%s_%s_rank%d.bin" % (os.environ["CAP_DIR"], tag, name, rank), "wb").write(data)
    except Exception as e:
        print("inproc dump", name, "failed:", e, flush=True)
open("%s/ready_%s_%d" % (os.environ["CAP_DIR"], tag, rank), "w").write(str(os.getpid()))
print("rank", rank, "ready pid", os.getpid(), "nccl", torch.cuda.nccl.version(), flush=True)
if mode == "sleeper":
    # a busy-wait kernel ahead of the next all_reduce: the collective stays scheduled, not completed
    torch.cuda._sleep(int(1.9e9 * 30))
    y = torch.ones(1024, device="cuda")
    dist.all_reduce(y)
    open("%s/ready2_%s_%d" % (os.environ["CAP_DIR"], tag, rank), "w").write(str(os.getpid()))
    while True:
        time.sleep(0.5)
if mode == "idle":
    while True:
        time.sleep(0.5)
elif mode == "waiter":
    time.sleep(2)
    y = torch.ones(1024, device="cuda")
    dist.all_reduce(y)          # rank 1 never joins this one
    print("rank", rank, "launched the 7th collective", flush=True)
    torch.cuda.synchronize()
    print("rank", rank, "synchronize returned (unexpected)", flush=True)
    while True:
        time.sleep(0.5)
elif mode == "culprit":
    while True:
        time.sleep(0.5)          # wedged outside torch: never enters the next all_reduce
'''


def ras(cmd_lines, name, timeout=25.0):
    t = time.time()
    try:
        s = socket.create_connection(("127.0.0.1", 28028), timeout=5)
    except OSError as e:
        log("RAS connect failed", name, e)
        open(os.path.join(WORK, "ras_%s.txt" % name), "w").write(">>> connect failed: %r\n" % (e,))
        return None
    s.settimeout(timeout)
    buf = b""
    try:
        s.sendall(b"CLIENT PROTOCOL 2\n")
        hello = s.recv(200)
        buf += b">>> hello: " + hello
        for c in cmd_lines:
            s.sendall((c + "\n").encode())
        deadline = time.time() + timeout
        while time.time() < deadline:
            # the server may keep the connection open after the report: stop after 3 s of silence
            gap = 3.0 if len(buf) > 40 + len(hello) else deadline - time.time()
            s.settimeout(max(0.1, min(gap, deadline - time.time())))
            chunk = s.recv(65536)
            if not chunk:
                buf += b"\n>>> EOF\n"
                break
            buf += chunk
    except socket.timeout:
        buf += b"\n>>> TIMEOUT after %.1fs\n" % (time.time() - t)
    except OSError as e:
        buf += ("\n>>> ERROR %s\n" % e).encode()
    finally:
        s.close()
    path = os.path.join(WORK, "ras_%s.txt" % name)
    open(path, "wb").write(buf)
    log("RAS", name, "bytes", len(buf), "in %.2fs" % (time.time() - t))
    return buf


def start(rank, world, mode, tag, port, extra=None):
    env = dict(os.environ)
    env.update(extra or {})
    env.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "%s/frpipe_%s_" % (WORK, tag),
        "TORCH_FR_DUMP_TEMP_FILE": "%s/frdump_%s_" % (WORK, tag),
        "CAP_DIR": WORK, "PYTHONUNBUFFERED": "1", "NCCL_DEBUG": "WARN",
    })
    out = open(os.path.join(WORK, "stdout_%s_rank%d.txt" % (tag, rank)), "w")
    return subprocess.Popen([sys.executable, os.path.join(WORK, "rank.py"), str(rank), str(world), mode, tag],
                            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(procs, tag, limit=90):
    deadline = time.time() + limit
    while time.time() < deadline:
        if all(os.path.exists("%s/ready_%s_%d" % (WORK, tag, r)) for r in range(len(procs))):
            return True
        if any(p.poll() is not None for p in procs):
            return False
        time.sleep(0.2)
    return False


def trigger_and_collect(tag, ranks, procs, limit=45):
    t = time.time()
    for r in ranks:
        pipe = "%s/frpipe_%s_%d.pipe" % (WORK, tag, r)
        log("pipe exists", pipe, os.path.exists(pipe))
        if os.path.exists(pipe):
            fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"1")
            os.close(fd)
    got = set()
    while time.time() - t < limit and len(got) < len(ranks):
        for r in ranks:
            p = "%s/frdump_%s_%d" % (WORK, tag, r)
            if r not in got and os.path.exists(p) and os.path.getsize(p) > 0:
                time.sleep(0.5)
                got.add(r)
                log("FR dump", p, os.path.getsize(p), "after %.1fs" % (time.time() - t))
        time.sleep(0.2)
    log("FR dumps got", sorted(got), "alive", [p.poll() is None for p in procs])


def kill_all(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
    for p in procs:
        p.wait()


def main():
    open(os.path.join(WORK, "rank.py"), "w").write(RANK_SRC)
    log(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip())
    import torch
    log("torch", torch.__version__, "nccl", torch.cuda.nccl.version())
    # scenario 1: one rank
    procs = [start(0, 1, "idle", "one", 29511)]
    ok = wait_ready(procs, "one")
    log("one-rank ready", ok)
    if ok:
        time.sleep(1)
        ras(["VERBOSE STATUS"], "one_verbose")
        ras(["STATUS"], "one_status")
        ras(["SET FORMAT json", "VERBOSE STATUS"], "one_json")
        trigger_and_collect("one", [0], procs)
    kill_all(procs)
    # scenario 1b: one rank, a collective queued behind a 30 s kernel; then the process stopped, then killed
    procs = [start(0, 1, "sleeper", "sleep", 29513)]
    ok = wait_ready(procs, "sleep")
    t = time.time()
    while ok and time.time() - t < 20 and not os.path.exists("%s/ready2_sleep_0" % WORK):
        time.sleep(0.2)
    log("sleeper ready", ok, os.path.exists("%s/ready2_sleep_0" % WORK))
    if ok:
        ras(["VERBOSE STATUS"], "sleep_verbose")
        trigger_and_collect("sleep", [0], procs, limit=20)
        os.kill(procs[0].pid, signal.SIGSTOP)
        time.sleep(1)
        ras(["VERBOSE STATUS"], "sleep_stopped", timeout=8)
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait()
        ras(["VERBOSE STATUS"], "sleep_killed", timeout=8)
    kill_all(procs)
    # scenario 2: two ranks sharing GPU 0; NCCL refuses two ranks on one GPU of one host ("Duplicate GPU
    # detected"), so each rank claims its own host id and they talk over the socket transport on loopback
    net = {"NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "1"}
    procs = [start(0, 2, "waiter", "two", 29512, dict(net, NCCL_HOSTID="capnode0")),
             start(1, 2, "culprit", "two", 29512, dict(net, NCCL_HOSTID="capnode1"))]
    ok = wait_ready(procs, "two")
    log("two-rank ready", ok, [p.poll() for p in procs])
    if ok:
        time.sleep(8)
        ras(["VERBOSE STATUS"], "two_hung_verbose")
        ras(["SET FORMAT json", "VERBOSE STATUS"], "two_hung_json")
        trigger_and_collect("two", [0, 1], procs, limit=40)
        os.kill(procs[1].pid, signal.SIGSTOP)
        log("rank 1 stopped")
        time.sleep(6)
        ras(["VERBOSE STATUS"], "two_stopped_verbose_a", timeout=20)
        ras(["VERBOSE STATUS"], "two_stopped_verbose_b", timeout=20)
        os.kill(procs[1].pid, signal.SIGKILL)
        log("rank 1 killed")
        time.sleep(12)
        ras(["VERBOSE STATUS"], "two_killed_verbose_a", timeout=20)
        time.sleep(10)
        ras(["VERBOSE STATUS"], "two_killed_verbose_b", timeout=20)
    kill_all(procs)
    log("done")
    LOG.close()
    with tarfile.open(os.path.join(OUT, "capture.tar.gz"), "w:gz") as t:
        for n in sorted(os.listdir(WORK)):
            if not n.endswith(".pipe"):
                t.add(os.path.join(WORK, n), arcname="capture/" + n)


if __name__ == "__main__":
    try:
        main()
    finally:
        if not os.path.exists(os.path.join(OUT, "capture.tar.gz")):
            with tarfile.open(os.path.join(OUT, "capture.tar.gz"), "w:gz") as t:
                t.add(WORK, arcname="capture")
