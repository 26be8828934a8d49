"""A job whose SIGTERM handler forks three children that ignore SIGTERM, then exits.

argv[1]: a file where the children's pids are written (one per line) as they start.
The children sleep on; only SIGKILL ends them (or anything else than SIGTERM).
"""

import os
import signal
import sys
import time

PIDS = sys.argv[1]


def on_term(signum, frame):
    for _ in range(3):
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(PIDS, "a") as f:
                f.write("%d\n" % os.getpid())
            while True:
                time.sleep(1)
    os._exit(0)


signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(1)
