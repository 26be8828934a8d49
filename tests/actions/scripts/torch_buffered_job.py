"""A discovered job: imports torch (so gpuwatch sees it as a job before it uses any GPU), then behaves as
buffered_job.py (stderr hello, buffered step lines, exit 3 when `stop` appears)."""

import os
import runpy

import torch  # noqa: F401  - what makes this process a job from its first sample

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "buffered_job.py"), run_name="__main__")
