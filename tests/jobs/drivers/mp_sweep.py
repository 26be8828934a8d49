"""A sweep driver that trains in multiprocessing children: argv[1] is the start method (spawn or fork),
argv[2] the way (process: one multiprocessing.Process per run; pool: a Pool of 2 mapping the runs). The
driver never imports torch; each child does, prints steps to the inherited stdout (a file), and appends
its pid to the file named by RUN_PIDS."""
import multiprocessing as mp
import os
import sys
import time


def train(run):
    import torch

    with open(os.environ["RUN_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\n")
    w = torch.zeros(4)
    step = 0
    while True:
        step += 1
        w += 0.1
        print(f"run {run} step {step}", flush=True)
        time.sleep(0.2)


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    if sys.argv[2] == "pool":
        with ctx.Pool(2) as pool:
            pool.map(train, [0, 1], chunksize=1)
    else:
        runs = [ctx.Process(target=train, args=(i,)) for i in range(2)]
        for p in runs:
            p.start()
        for p in runs:
            p.join()
