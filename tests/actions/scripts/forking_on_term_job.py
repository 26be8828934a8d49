"""A job whose SIGTERM handler forks three children that ignore SIGTERM, then exits.

argv[1]: a file where the children's pids are written (one per line) before the job exits.
The children sleep on; only SIGKILL ends them (or anything else than SIGTERM).
"""

import os
import signal
import sys
import time

PIDS = sys.argv[1]


def on_term(signum, frame):
    born = []
    # A child signalled before it ignores SIGTERM would run this handler itself: it waits, blocked.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
            while True:
                time.sleep(1)
        born.append(pid)
    # The parent writes them before it exits: a child may be SIGKILLed before it could write anything.
    with open(PIDS, "a") as f:
        f.write("".join("%d\n" % pid for pid in born))
    os._exit(0)


signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(1)
