"""Builders for ProcInfo / HostSample shaped like what the probe reports."""

from __future__ import annotations

from gpuwatch_tui.model import ChildProc, FdTarget, GpuProcess, GpuSample, HostSample, ProcInfo

LOG = FdTarget("/work/run/train.log", "file", append=True, size=0)


def proc(pid, ppid, cmdline, *, name="python3", cpu=10.0, kids_cpu=0.0, children=(), stdout=LOG, state="S",
         start=1000.0, unbuffered=False, cwd="/work/run", is_python=True):
    return ProcInfo(pid=pid, ppid=ppid, start_time=start + pid / 1000, name=name, cmdline=tuple(cmdline),
                    cwd=cwd, state=state, cpu_s=cpu, cpu_children_s=kids_cpu, rss_bytes=1 << 30, threads=8,
                    sid=pid, pgid=pid, children=tuple(children), stdout=stdout, stderr=stdout,
                    unbuffered=unbuffered, unbuffered_reason="-u" if unbuffered else "", is_python=is_python)


def gpu(index, pids, util=0.0, power=119.0, mem=81_000.0):
    return GpuSample(index, f"GPU-{index}", "NVIDIA H200", util, mem, 143_771.0, 40.0, power, 700.0, 1980.0,
                     processes=tuple(GpuProcess(p, 40_000.0) for p in pids))


def torchrun_tree(cpu=10.0, util=99.0, power=690.0, with_agent=True, compilers=()):
    agent = proc(100, 50, ["/venv/bin/python", "/venv/bin/torchrun", "--nproc_per_node", "2", "train.py", "--lr", "1e-4"],
                 name="pt_elastic", cpu=2.0, kids_cpu=2 * cpu)
    kids = [ChildProc(300 + i, "pt_data_worker", ("python3",), "S", 1.0) for i in range(2)]
    kids += [ChildProc(400 + i, c, (c,), "R", 0.5) for i, c in enumerate(compilers)]
    r0 = proc(101, 100, ["/venv/bin/python", "-u", "train.py", "--lr", "1e-4"], cpu=cpu, children=tuple(kids),
              unbuffered=True)
    r1 = proc(102, 100, ["/venv/bin/python", "-u", "train.py", "--lr", "1e-4"], cpu=cpu, unbuffered=True)
    shell = proc(50, 1, ["bash"], name="bash", is_python=False, stdout=None)
    procs = {101: r0, 102: r1}
    if with_agent:
        procs[100] = agent
        procs[50] = shell
    gpus = [gpu(0, [101], util, power), gpu(1, [102], util, power)]
    return procs, gpus


def sample(t, procs, gpus, tails=(), gone=(), dirs=(), matches=None):
    return HostSample(time=t, gpu_source="nvml", gpus=list(gpus), procs=dict(procs), gone=list(gone),
                      tails=list(tails), dirs=list(dirs), matches=matches or {})
