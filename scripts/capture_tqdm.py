"""Capture real tqdm output written to a file (as `python x.py > log 2>&1` sees it).

    /work/capture-venvs/pl/bin/python scripts/capture_tqdm.py     # needs tqdm and rich
Writes tests/data/logs/tqdm-<version>-<case>.log.
"""

from __future__ import annotations

import sys
import time

from capture_common import run_to_log, version_of


def case_basic() -> None:
    from tqdm import tqdm
    for _ in tqdm(range(200), desc="train"):
        time.sleep(0.005)


def case_slow() -> None:
    # Slow steps print a seconds-per-iteration rate.
    from tqdm import tqdm
    for _ in tqdm(range(3), desc="step"):
        time.sleep(1.3)


def case_tokens() -> None:
    from tqdm import tqdm
    with tqdm(total=2_000_000, unit="tok", unit_scale=True, desc="tokens") as bar:
        for _ in range(40):
            time.sleep(0.02)
            bar.update(50_000)


def case_nototal() -> None:
    from tqdm import tqdm

    def stream():
        for i in range(3000):
            yield i
    for _ in tqdm(stream()):
        time.sleep(0.0005)


def case_postfix() -> None:
    from tqdm import tqdm
    bar = tqdm(range(30), desc="Epoch 1/3")
    for i in bar:
        time.sleep(0.02)
        bar.set_postfix(loss=2.5 / (i + 1), lr=3e-4)


def case_rich() -> None:
    # tqdm.rich draws through rich, which prints nothing live when not on a terminal.
    import warnings
    warnings.simplefilter("ignore")
    from tqdm.rich import tqdm
    for _ in tqdm(range(50), desc="rich"):
        time.sleep(0.01)
    print("done")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        CASES[sys.argv[2]]()
        return
    version = version_of("tqdm")
    for name in CASES:
        run_to_log([sys.executable, __file__, "--child", name], f"tqdm-{version}-{name}.log")


if __name__ == "__main__":
    main()
