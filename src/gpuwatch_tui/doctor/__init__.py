"""`gpuwatch doctor`: per-host checks that say what is wrong and what to do (no Textual here)."""

from .checks import CHECK_NAMES, FAIL, PASS, SKIP, WARN, Check, HostReport
from .run import doctor_failed, doctor_json, render_doctor, run_doctor

__all__ = ["CHECK_NAMES", "FAIL", "PASS", "SKIP", "WARN", "Check", "HostReport", "doctor_failed",
           "doctor_json", "render_doctor", "run_doctor"]
