# gpuwatch probe: frames out on stdout, and the exit that takes the probe's children along.
#
# Standard library only, Python 3.6+. Shipped inside the probe bundle as the module "output".
import os
import sys
import threading

from wire import encode_frame


_out_lock = threading.Lock()
CHILDREN = []  # subprocesses the probe started (nvidia-smi); killed on exit


def emit(frame):
    data = encode_frame(frame)
    with _out_lock:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except (BrokenPipeError, OSError, ValueError):
            shutdown(0)


def shutdown(code):
    for child in CHILDREN:
        try:
            child.kill()
        except Exception:
            pass
    os._exit(code)
