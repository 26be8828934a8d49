"""Logs other people published (tests/data/published_logs), replayed through the real interpreter and
phase engine: at each excerpt's last line, the engine must say what a person reading it would say.

One test per excerpt and truth field, so a miss reads as `<framework>/<name>-<field>`.
`python scripts/score_published_logs.py` prints the same comparison as scores per framework.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from .published_logs import CORPUS, TRUTH_KEYS, agrees, load_corpus, replay

try:
    EXCERPTS = load_corpus()
    PROBLEM = None
except ValueError as e:  # reported by test_corpus_is_well_formed, not as a collection error
    EXCERPTS, PROBLEM = [], str(e)
BY_NAME = {x.name: x for x in EXCERPTS}
CASES = [(x.name, key) for x in EXCERPTS for key in TRUTH_KEYS if key in x.truth]


@lru_cache(maxsize=None)
def outcome(name: str):
    return replay(BY_NAME[name])


def test_corpus_is_well_formed():
    assert PROBLEM is None, PROBLEM
    assert EXCERPTS, "no excerpts found"


def test_readme_lists_every_excerpt():
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    missing = [x.name for x in EXCERPTS if f"`{x.name}`" not in readme]
    assert not missing, f"not in the README's table: {missing}"


@pytest.mark.parametrize("name,key", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_engine_reads_the_published_log(name, key):
    x = BY_NAME[name]
    got = outcome(name)
    expected = x.truth[key]
    assert agrees(key, expected, got.value(key)), (
        f"{name}: {key} should be {expected!r}, the engine says {got.value(key)!r} "
        f"(verdict {got.phase}/{got.reason}; {'; '.join(got.evidence[:3])}; read {got.numbers}) "
        f"[{x.meta['source']}]")
