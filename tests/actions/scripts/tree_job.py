"""A launcher-shaped process tree: this launcher starts 2 workers, each starts a grandchild that ignores
SIGTERM (as a stuck DataLoader worker may). Writes every pid to the file in argv[1] once all are up."""

import json
import os
import signal
import subprocess
import sys
import time


def grandchild(ready_path):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(ready_path, "w") as f:  # only now, with SIGTERM ignored, is it "up"
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)


def worker(ready_path):
    subprocess.Popen([sys.executable, __file__, "grandchild", ready_path])
    while True:
        time.sleep(1)


def launcher(pids_path):
    workers = []
    for i in range(2):
        ready = "%s.w%d" % (pids_path, i)
        workers.append((subprocess.Popen([sys.executable, __file__, "worker", ready]), ready))
    tree = {"launcher": os.getpid(), "workers": [], "grandchildren": []}
    for proc, ready in workers:
        while not (os.path.exists(ready) and open(ready).read()):
            time.sleep(0.02)
        tree["workers"].append(proc.pid)
        tree["grandchildren"].append(int(open(ready).read()))
    with open(pids_path + ".tmp", "w") as f:
        json.dump(tree, f)
    os.rename(pids_path + ".tmp", pids_path)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    if sys.argv[1] == "grandchild":
        grandchild(sys.argv[2])
    elif sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        launcher(sys.argv[1])
