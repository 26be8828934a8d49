"""`gpuwatch doctor`: per-host checks that say what is wrong and what to do (no Textual here)."""

from .checks import CHECK_NAMES, FAIL, PASS, SKIP, WARN, Check, HostReport

__all__ = ["CHECK_NAMES", "FAIL", "PASS", "SKIP", "WARN", "Check", "HostReport"]
