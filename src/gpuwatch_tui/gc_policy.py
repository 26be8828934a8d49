"""How often this process collects cycles: the process's owner (the CLI, a benchmark) chooses, not a
library object, since the thresholds are process-wide."""

from __future__ import annotations

import gc

# The fleet's state is hundreds of thousands of long-lived objects (samples, log lines, views). With
# Python's default (a young collection every 700 allocations, older ones after 10 of those) the cycle
# collector re-scanned them often: ~25% of the process's CPU at 128 hosts (bench_core_fleet). The
# tracker makes few cycles; collecting them less often costs little memory.
GC_THRESHOLDS = (50_000, 50, 100)
_DEFAULT_GC_THRESHOLDS = (700, 10, 10)


def relax_gc() -> None:
    """Collect cycles less often, unless someone already chose the thresholds."""
    if gc.get_threshold() == _DEFAULT_GC_THRESHOLDS:
        gc.set_threshold(*GC_THRESHOLDS)
