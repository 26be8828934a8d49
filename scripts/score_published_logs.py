"""Score the phase engine against the corpus of published training logs.

    python scripts/score_published_logs.py [--misses-only] [--framework NAME] [--only NAME|@FILE ...]

Replays every excerpt of tests/data/published_logs through the real log interpreter and phase engine
(as tests/jobs/test_published_logs.py does) and prints, per framework and overall, how many truth
fields the engine got right: phase, crash reason, step, total, epoch, loss; then every miss with what
the engine said instead. Run it from the repository root with PYTHONPATH=src.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _corpus_module():
    spec = importlib.util.spec_from_file_location("published_logs", ROOT / "tests" / "jobs" / "published_logs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def _names(items: list[str]) -> set[str]:
    names: set[str] = set()
    for item in items:
        if item.startswith("@"):
            lines = Path(item[1:]).read_text(encoding="utf-8").splitlines()
            names.update(line.strip() for line in lines if line.strip() and not line.startswith("#"))
        else:
            names.add(item)
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", help="score only this framework's excerpts")
    ap.add_argument("--misses-only", action="store_true", help="list the misses, no table")
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help="score only these excerpts (framework/name); @FILE reads the names from FILE, one a line "
                         "(e.g. @tests/data/published_logs/held-out-2026-12-06.txt)")
    args = ap.parse_args(argv)
    corpus = _corpus_module()
    excerpts = [x for x in corpus.load_corpus() if args.framework in (None, x.framework)]
    if args.only:
        wanted = _names(args.only)
        unknown = wanted - {x.name for x in excerpts}
        if unknown:
            print(f"no such excerpts: {sorted(unknown)}", file=sys.stderr)
            return 2
        excerpts = [x for x in excerpts if x.name in wanted]
    if not excerpts:
        print("no excerpts", file=sys.stderr)
        return 2
    keys = ("phase", "reason", "step", "total", "epoch", "loss")
    score: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    whole: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # excerpts right on every field
    misses = []
    for x in excerpts:
        got = corpus.replay(x)
        all_right = True
        for key in keys:
            if key not in x.truth:
                continue
            ok = corpus.agrees(key, x.truth[key], got.value(key))
            for bucket in (score[x.framework][key], score["ALL"][key]):
                bucket[0] += ok
                bucket[1] += 1
            if not ok:
                all_right = False
                misses.append(f"{x.name}: {key} {x.truth[key]!r} != {got.value(key)!r}"
                              f"  (verdict {got.phase}/{got.reason})")
        for bucket in (whole[x.framework], whole["ALL"]):
            bucket[0] += all_right
            bucket[1] += 1
    if not args.misses_only:
        head = f"{'framework':<16} {'excerpts':>9}  " + "  ".join(f"{k:>9}" for k in keys)
        print(head)
        print("-" * len(head))
        for fw in sorted(k for k in score if k != "ALL") + ["ALL"]:
            if fw == "ALL":
                print("-" * len(head))
            cells = []
            for key in keys:
                right, n = score[fw][key]
                cells.append(f"{right:>4}/{n:<4}" if n else f"{'-':>9}")
            right, n = whole[fw]
            print(f"{fw:<16} {f'{right}/{n}':>9}  " + "  ".join(cells))
        print("\n(excerpts: right on every truth field / all; cells: right / asked)")
    print(f"\n{len(misses)} misses:" if misses else "\nno misses")
    for m in misses:
        print("  " + m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
