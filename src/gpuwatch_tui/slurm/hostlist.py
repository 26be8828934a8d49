"""Slurm hostlists: `gpu[01-03,07],login1` -> gpu01 gpu02 gpu03 gpu07 login1 (what `scontrol show
hostnames` prints), without a round trip to the login node.

Covers the forms Slurm writes: several bracket groups in one name (`r[1-2]n[01-02]`), zero-padded
ranges (the width of the lower bound is kept), and commas inside and outside brackets.
"""

from __future__ import annotations

import itertools
import re

MAX_HOSTS = 100_000  # a typo like n[1-99999999] must not eat the memory


class HostlistError(ValueError):
    pass


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in hostlist {text!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in hostlist {text!r}")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _expand_group(body: str, whole: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise HostlistError(f"bad range {item!r} in hostlist {whole!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise HostlistError(f"range {item!r} runs backwards in hostlist {whole!r}")
        if int(hi) - int(lo) >= MAX_HOSTS:
            raise HostlistError(f"range {item!r} in hostlist {whole!r} has more than {MAX_HOSTS} hosts")
        width = len(lo)
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def expand_hostlist(text: str) -> list[str]:
    """Every host name of a Slurm hostlist, in order, duplicates kept out. '' and '(null)' -> []."""
    text = (text or "").strip()
    if text in ("", "(null)", "None", "N/A", "None assigned"):
        return []
    hosts: list[str] = []
    seen: set[str] = set()
    for part in _split_top(text):
        pieces = re.split(r"\[([^\]]*)\]", part)
        literals, groups = pieces[0::2], pieces[1::2]
        choices = [_expand_group(g, text) for g in groups]
        for combo in itertools.product(*choices):
            name = literals[0] + "".join(c + lit for c, lit in zip(combo, literals[1:]))
            if name not in seen:
                seen.add(name)
                hosts.append(name)
            if len(hosts) > MAX_HOSTS:
                raise HostlistError(f"hostlist {text!r} has more than {MAX_HOSTS} hosts")
    return hosts
