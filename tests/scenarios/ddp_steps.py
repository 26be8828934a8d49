"""Really run distributed data parallel steps under torchrun on CPU (gloo): every rank all-reduces a
tensor each step and logs `[rankN] step N allreduce ok` lines the way nccl_hang.py does on GPUs
(scripts/gpu_jobs/). Started as `nohup python -m torch.distributed.run --standalone --nproc_per_node 2
ddp_steps.py ... > train.log 2>&1 &`. Exits 0 with a note when torch is not installed."""

import os, sys, time  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse_args  # noqa: E402


def main() -> None:
    def extra(p):
        p.add_argument("--log-every", type=int, default=5, help="log one line every this many steps")
    args = parse_args(__doc__, steps=60, step_time=0.2, extra=extra)
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("ddp_steps.py: torch is not installed", flush=True)
        return
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.ones(1 << 16)
    for step in range(1, args.steps + 1):
        t0 = time.monotonic()
        dist.all_reduce(x)
        x /= dist.get_world_size()
        time.sleep(max(0.0, args.step_time - (time.monotonic() - t0)))
        if step % args.log_every == 0:
            print(f"[rank{rank}] step {step} allreduce ok", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print("training complete", flush=True)


if __name__ == "__main__":
    main()
