"""Log rules as data: the built-in pack (rules.toml next to this file) plus user rules.

A rule turns one log line into facts: a phase hint, a detail tag, an event (error, traceback,
finished, exit-code, signal) and fields taken from the regex's named groups (step, total, rate,
loss, ...). See rules.toml for the schema; `parse_rules` validates user rules from the config.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import ConfigError
from ..vocab import LOG_PHASES

if sys.version_info >= (3, 11):
    import re._constants as _c
    import re._parser as _sre_parse
    import tomllib
else:  # pragma: no cover
    import sre_constants as _c
    import sre_parse as _sre_parse
    import tomli as tomllib

# Phases a rule may announce; "auto": decided from a progress bar's description (`desc`).
HINT_PHASES = (*LOG_PHASES, "auto")
EVENTS = ("error", "traceback", "finished", "exit-code", "signal")
PROGRESS_FIELDS = ("step", "total", "percent", "rate", "unit", "loss", "epoch", "epochs", "eta", "lr")
_RULE_KEYS = {"name", "pattern", "phase", "detail", "event", "progress", "ignore_case", "unit"}


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    phase: str | None = None
    detail: str | None = None
    event: str | None = None
    progress: bool | None = None  # None: decided by phase
    unit: str | None = None  # constant unit when the pattern has no `unit` group
    source: str = "builtin"

    def counts_as_progress(self, phase: str | None) -> bool:
        if self.progress is not None:
            return self.progress
        return phase in (None, "training")


@dataclass
class LineMatch:
    """What the rules made of one line."""

    phase: str | None = None
    detail: str | None = None
    rule: str | None = None  # the rule that set the phase
    rules: list[str] = field(default_factory=list)
    progress: dict[str, str] = field(default_factory=dict)  # training progress fields
    phase_progress: dict[str, str] = field(default_factory=dict)  # e.g. loading shards 2/4
    fields: dict[str, str] = field(default_factory=dict)  # every named group, first match wins
    events: list[tuple[str, str | None, str]] = field(default_factory=list)  # (event, detail, rule)

    @property
    def empty(self) -> bool:
        return not self.rules


class RuleSet:
    """User rules first, then the built-in pack; matches a line against all of them."""

    def __init__(self, rules: list[Rule], desc_phases: dict[str, re.Pattern[str]] | None = None):
        self.rules = list(rules)
        self.desc_phases = desc_phases if desc_phases is not None else builtin_desc_phases()
        # Every line meets every rule: a rule whose match needs some text (a bar's "%|" or "━")
        # is not searched on a line without it. The bar patterns cost ~40 us a search otherwise.
        # One piece (the longest) is checked: a substring test costs far less than a search.
        # A case-insensitive rule's piece is lowercased ASCII, checked only on an ASCII line (some
        # non-ASCII letters match ASCII ones under re.IGNORECASE: "K" (Kelvin) matches "k").
        self._checks = []
        for rule in self.rules:
            folded = bool(rule.pattern.flags & re.IGNORECASE)
            needs = required_text(rule.pattern, folded)
            self._checks.append((rule, max(needs, key=len) if needs else "", folded))

    @classmethod
    def with_user_rules(cls, user_rules: list[Rule] | tuple[Rule, ...] = ()) -> "RuleSet":
        return cls([*user_rules, *builtin_rules()])

    def phase_for_desc(self, desc: str | None) -> str:
        if desc:
            for phase, pattern in self.desc_phases.items():
                if pattern.search(desc):
                    return phase
        return "training"

    def match(self, line: str) -> LineMatch:
        result = LineMatch()
        followers: list[dict[str, str]] = []  # numbers of phase-less rules: decided at the end
        lowered = line.lower() if line.isascii() else None
        for rule, needs, folded in self._checks:
            if needs:
                if not folded:
                    if needs not in line:
                        continue
                elif lowered is not None and needs not in lowered:
                    continue
            m = rule.pattern.search(line)
            if m is None:
                continue
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            phase = rule.phase
            if phase == "auto":
                phase = self.phase_for_desc(groups.get("desc", "").strip())
            if rule.unit and "unit" not in groups:
                groups["unit"] = rule.unit
            result.rules.append(rule.name)
            for key, value in groups.items():
                result.fields.setdefault(key, value)
            numbers = {k: v for k, v in groups.items() if k in PROGRESS_FIELDS or k == "desc"}
            if rule.progress is None and phase is None:
                followers.append(numbers)
            elif rule.counts_as_progress(phase):
                _merge(result.progress, numbers)
            else:
                _merge(result.phase_progress, numbers)
            if phase and result.phase is None:
                result.phase = phase
                result.rule = rule.name
                result.detail = rule.detail
            if rule.event:
                result.events.append((rule.event, rule.detail, rule.name))
        # A rate on a loading bar is not a training rate: phase-less rules follow the line.
        target = result.progress if result.phase in (None, "training") else result.phase_progress
        for numbers in followers:
            _merge(target, numbers)
        return result


def required_text(pattern: re.Pattern[str], folded: bool = False) -> tuple[str, ...]:
    """Pieces of text every match of `pattern` contains: its runs of plain characters outside any
    alternative, optional part or lookaround. Empty when unsure.

    A case-insensitive pattern gives nothing unless `folded`: then its pieces are lowercased and
    cut at non-ASCII characters, for a check against an ASCII line's lowercase."""
    if not isinstance(pattern.pattern, str) or pattern.flags & re.VERBOSE:
        return ()
    if pattern.flags & re.IGNORECASE and not folded:
        return ()
    try:
        parsed = _sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # a parser detail changed: search every line, as before
        return ()
    needs: list[str] = []
    _collect_required(list(parsed), needs, folded)
    if not folded:
        return tuple(needs)
    pieces = [p.lower() for n in needs for p in re.split(r"[^\x00-\x7f]+", n)]
    return tuple(p for p in pieces if p)


def _collect_required(items: list, needs: list[str], folded: bool) -> None:
    run = ""
    for op, arg in items:
        if op is _c.LITERAL:
            run += chr(arg)
            continue
        if run:
            needs.append(run)
            run = ""
        if op is _c.SUBPATTERN:
            if folded or not arg[1] & re.IGNORECASE:  # (?i:...) inside: letters of either case
                _collect_required(list(arg[-1]), needs, folded)  # a group: its text is needed too
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and arg[0] >= 1:
            body = list(arg[2])
            if len(body) == 1 and body[0][0] is _c.LITERAL:
                needs.append(chr(body[0][1]))  # "━+": at least one
    if run:
        needs.append(run)


def _merge(into: dict[str, str], numbers: dict[str, str]) -> None:
    for key, value in numbers.items():
        into.setdefault(key, value)


def _compile(pattern: object, ignore_case: bool, file: str, key: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(file, key, "a non-empty regular expression string", pattern)
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ConfigError(file, key, f"a valid regular expression ({exc})", pattern) from None


def parse_rules(raw: list[Any], file: str, source: str = "user", table: str = "rules") -> list[Rule]:
    """Validate `[[rules]]` tables from a config file into Rules.

    Raises ConfigError naming the file, the key (e.g. `rules[2].pattern`) and what was expected.
    """
    if not isinstance(raw, list):
        raise ConfigError(file, table, "an array of tables ([[rules]])", raw)
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"{table}[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(file, where, "a table with name and pattern", item)
        unknown = sorted(set(item) - _RULE_KEYS)
        if unknown:
            raise ConfigError(file, f"{where}.{unknown[0]}", "one of " + ", ".join(sorted(_RULE_KEYS)), unknown[0])
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(file, f"{where}.name", "a non-empty string", name)
        if name in seen:
            raise ConfigError(file, f"{where}.name", "a name not used by another rule", name)
        seen.add(name)
        ignore_case = item.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            raise ConfigError(file, f"{where}.ignore_case", "true or false", ignore_case)
        pattern = _compile(item.get("pattern"), ignore_case, file, f"{where}.pattern")
        phase = item.get("phase")
        if phase is not None and phase not in HINT_PHASES:
            raise ConfigError(file, f"{where}.phase", "one of " + ", ".join(HINT_PHASES), phase)
        event = item.get("event")
        if event is not None and event not in EVENTS:
            raise ConfigError(file, f"{where}.event", "one of " + ", ".join(EVENTS), event)
        detail = item.get("detail")
        if detail is not None and (not isinstance(detail, str) or not detail):
            raise ConfigError(file, f"{where}.detail", "a non-empty string", detail)
        progress = item.get("progress")
        if progress is not None and not isinstance(progress, bool):
            raise ConfigError(file, f"{where}.progress", "true or false", progress)
        unit = item.get("unit")
        if unit is not None and not isinstance(unit, str):
            raise ConfigError(file, f"{where}.unit", "a string such as \"it/s\"", unit)
        if phase is None and event is None and progress is None and not pattern.groupindex:
            raise ConfigError(file, where, "at least one of phase, event, or named groups in pattern", item)
        rules.append(Rule(name, pattern, phase, detail, event, progress, unit, source))
    return rules


@lru_cache(maxsize=1)
def _builtin_pack() -> dict[str, Any]:
    from importlib import resources  # only when the built-in rules are first needed (it is slow to import)

    text = resources.files(__package__).joinpath("rules.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@lru_cache(maxsize=1)
def _builtin_rules_tuple() -> tuple[Rule, ...]:
    return tuple(parse_rules(_builtin_pack()["rules"], "gpuwatch_tui/jobs/rules.toml", source="builtin"))


def builtin_rules() -> list[Rule]:
    return list(_builtin_rules_tuple())


@lru_cache(maxsize=1)
def builtin_desc_phases() -> dict[str, re.Pattern[str]]:
    return {phase: re.compile(p) for phase, p in _builtin_pack().get("desc_phases", {}).items()}
