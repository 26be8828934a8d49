"""The recording `gpuwatch demo` replays: real H200 runs (see scripts/convert_watch_recording.py)."""

from __future__ import annotations

from pathlib import Path

DEMO_FILE = "h200-demo.jsonl.gz"


def demo_recording() -> Path:
    return Path(__file__).resolve().parent / DEMO_FILE
