"""A job whose main process forks workers that outlive it, as DataLoader workers do when their rank is SIGKILLed.

argv[1]: a file where the workers' pids are written (one a line) before "ready" is printed.
argv[2]: how many workers; every second one makes its own session (setsid), as some pools do.
Each worker names itself `pt_data_worker` (PyTorch's name for them) and sleeps until it is signalled.
"""

import os
import sys
import time

PIDS = sys.argv[1]
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def worker(own_session):
    if own_session:
        os.setsid()
    with open("/proc/self/comm", "w") as f:
        f.write("pt_data_worker")
    while True:
        time.sleep(1)


born = []
for i in range(COUNT):
    pid = os.fork()
    if pid == 0:
        try:
            worker(i % 2 == 1)
        finally:
            os._exit(0)
    born.append(pid)
with open(PIDS, "w") as f:
    f.write("".join("%d\n" % pid for pid in born))
print("ready", flush=True)
while True:
    time.sleep(1)
