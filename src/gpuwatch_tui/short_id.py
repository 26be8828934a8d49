"""A job's short id: the handle a person types and reads when every job is `train.py`.

Derived only from what the host says of the job's top process (host name, root pid, root start in
clock ticks since boot), so every gpuwatch watching that host computes the same id for the same run.
Five characters from a 32-letter alphabet without look-alikes (no 0/o, 1/l); the first is always a
letter, so an id never reads as a pid. Two jobs of one host whose ids would collide: the one that
started first keeps the short form, the other takes the next longer prefix of its own hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
LETTERS = ALPHABET[:24]
SHORT_LEN = 5
MAX_LEN = 12


def short_id(parts: tuple, length: int = SHORT_LEN) -> str:
    """The id of `length` characters derived from `parts` (stable across runs and machines)."""
    digest = int.from_bytes(hashlib.sha256("\0".join(str(p) for p in parts).encode()).digest(), "big")
    out = [LETTERS[digest % len(LETTERS)]]
    digest //= len(LETTERS)
    for _ in range(length - 1):
        out.append(ALPHABET[digest % len(ALPHABET)])
        digest //= len(ALPHABET)
    return "".join(out)


def run_parts(host: str, root_pid: int, root_start_ticks: int) -> tuple:
    """What identifies one run on its host: its top process for good (a reused pid has another start)."""
    return ("run", host, root_pid, root_start_ticks)


def multi_parts(run_key: str) -> tuple:
    """What identifies a run over several hosts: the key that ties its parts (the same on every watcher)."""
    return ("multi", run_key)


def assign(wanting: Iterable[tuple[tuple, tuple]], taken: set[str]) -> list[str]:
    """Ids for `wanting` = [(order key, parts)], taken in order-key order (the earliest start first);
    each gets the shortest prefix of its own derivation that is not in `taken` (which grows)."""
    items = list(wanting)
    given: dict[int, str] = {}
    for i in sorted(range(len(items)), key=lambda k: items[k][0]):
        parts = items[i][1]
        sid = short_id(parts)
        length = SHORT_LEN
        while sid in taken and length < MAX_LEN:
            length += 1
            sid = short_id(parts, length)
        taken.add(sid)
        given[i] = sid
    return [given[i] for i in range(len(items))]


def root_key(job) -> tuple:
    """(root pid, root start ticks) of a job record, or () while its top process is unknown. Ticks are
    what the host's /proc says (exact on every watcher); a probe that gave none leaves the start time."""
    if job.root is None:
        return ()
    pid, start = job.root
    return (pid, job.start_ticks.get(pid) or round(start))


def give_short_ids(jobs: list) -> None:
    """Give each job record of one host that lacks one (or whose root moved up) its short id. A job that
    has one keeps it: a newer job that would collide takes a longer one. A configured job that has not
    run yet is named by host and job name."""
    wanting = []
    for job in jobs:
        key = root_key(job)
        if job.short_id and job.short_root == key:
            continue
        if key:
            wanting.append((job, key, (key[1], key[0]), run_parts(job.host, *key)))
        else:
            wanting.append((job, key, (float("inf"), job.name), ("configured", job.host, job.name)))
    if not wanting:
        return
    mine = {id(w[0]) for w in wanting}
    taken = {j.short_id for j in jobs if j.short_id and id(j) not in mine}
    ids = assign([(order, parts) for _, _, order, parts in wanting], taken)
    for (job, key, _, _), sid in zip(wanting, ids):
        job.short_id, job.short_root = sid, key


def looks_like_short_id(text: str) -> bool:
    """Whether `text` has the shape of a short id (a pid or a script name does not)."""
    return SHORT_LEN <= len(text) <= MAX_LEN and text[0] in LETTERS and all(c in ALPHABET for c in text)
