"""Really torch.compile a small model on CPU (dynamo + inductor, C++ codegen through gcc), then
train, printing HF-style log dicts. Exits 0 with a note when torch is not installed."""

import os, sys, time  # noqa: E401
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import parse_args  # noqa: E402


def main() -> None:
    def extra(p):
        p.add_argument("--mode", default=None, help="torch.compile mode, e.g. max-autotune-no-cudagraphs")
        p.add_argument("--graphs", type=int, default=1,
                       help="compile this many differently shaped models before training (a longer compile)")
    args = parse_args(__doc__, steps=10, step_time=0.1, extra=extra)
    try:
        import torch
    except ImportError:
        print("compile.py: torch is not installed; nothing to compile", flush=True)
        return
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled = torch.compile(model, mode=args.mode)
    print("compiling model...", flush=True)
    for i in range(1, args.graphs):
        # More graphs, more kernels: each shape is its own compile (and its own g++ runs).
        width = 64 + 32 * i
        extra_model = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.Tanh(), torch.nn.Linear(2 * width, 1))
        torch.compile(extra_model, mode=args.mode)(torch.randn(8, width)).sum().backward()
    for step in range(1, args.steps + 1):
        t0 = time.monotonic()
        x = torch.randn(32, 64)
        loss = compiled(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        time.sleep(max(0.0, args.step_time - (time.monotonic() - t0)))
        print({"loss": round(loss.item(), 4), "learning_rate": 0.01, "epoch": round(step / args.steps, 2)},
              flush=True)


if __name__ == "__main__":
    main()
