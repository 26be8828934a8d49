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
from .progress import LineProgress, ProgressReader, read_fields

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
EVENTS = ("error", "traceback", "finished", "exit-code", "signal", "shutdown")
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

    def fill(self, line: str) -> LineMatch:
        """Itself: `line` is the matched line (a LineTemplate's `fill` reads a line of its shape)."""
        return self

    def progress_of(self, line: str) -> LineProgress:
        """The progress fields parsed (`line` is the matched line: the fields hold its text already)."""
        return read_fields(self.progress)

    def phase_progress_of(self, line: str) -> dict[str, str]:
        return dict(self.phase_progress)


class RuleSet:
    """User rules first, then the built-in pack; matches a line against all of them."""

    def __init__(self, rules: list[Rule], desc_phases: dict[str, re.Pattern[str]] | None = None):
        self.rules = list(rules)
        self.desc_phases = desc_phases if desc_phases is not None else builtin_desc_phases()
        # A bar's phase is read from its words (`phase_for_desc`): by patterns that treat every digit alike,
        # it is the same on every line of the bar's shape, so such a shape gets a template too.
        self._desc_blind = all(digit_blind(p) for p in self.desc_phases.values())
        # Every line meets every rule: a rule whose match needs some text (a bar's "%|" or "━", one
        # of "step" / "iter") is not searched on a line without it. The bar patterns cost ~40 us a
        # search otherwise. Each rule's needed text is a few alternatives (any one must be there);
        # one combined pass over the line (`_plan`) finds which are, instead of a test per rule.
        # A case-insensitive rule's pieces are lowercased ASCII, checked only on an ASCII line (some
        # non-ASCII letters match ASCII ones under re.IGNORECASE: "K" (Kelvin) matches "k").
        self._checks = []
        for rule in self.rules:
            folded = bool(rule.pattern.flags & re.IGNORECASE)
            self._checks.append((rule, required_any(rule.pattern, folded), folded))
        self._plan: _Prefilter | None = None

    @classmethod
    def with_user_rules(cls, user_rules: list[Rule] | tuple[Rule, ...] = ()) -> "RuleSet":
        return cls([*user_rules, *builtin_rules()])

    def phase_for_desc(self, desc: str | None) -> str:
        if desc:
            for phase, pattern in self.desc_phases.items():
                if pattern.search(desc):
                    return phase
        return "training"

    def template(self, line: str) -> LineTemplate | None:
        """The template of the line's shape when the line needs no search (`match` would fill it):
        its facts are read from it with no LineMatch made. None: use `match`."""
        plan = self._plan
        if plan is None or plan.checks is not self._checks:
            plan = self._plan = _Prefilter(self._checks)
        return plan.template(line)

    def match(self, line: str) -> LineMatch:
        plan = self._plan
        if plan is None or plan.checks is not self._checks:
            plan = self._plan = _Prefilter(self._checks)
        candidates, new_shape, template = plan.candidates(line)
        if template is not None:
            return template.fill(line)
        found: list[tuple[Rule, str | None, dict]] = []
        matched: list[int] = []
        spans: list[dict] | None = [] if new_shape is not None else None
        for index, rule in candidates:
            m = rule.pattern.search(line)
            if m is None:
                continue
            matched.append(index)
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            phase = rule.phase
            if phase == "auto":
                phase = self.phase_for_desc(groups.get("desc", "").strip())
                if not self._desc_blind:
                    spans = None  # the phase is read from the bar's words by digits: no template for this shape
            if spans is not None:
                spans.append({k: m.span(k) for k in groups})
            found.append((rule, phase, groups))
        result = _assemble(found)
        if new_shape is not None:
            template = None
            if spans is not None and all(plan.blind[i] for i in matched):
                template = LineTemplate(_assemble([(r, p, g) for (r, p, _), g in zip(found, spans)]), line)
            plan.remember(new_shape, matched, template)
        return result


def _assemble(found: list[tuple[Rule, str | None, dict]]) -> LineMatch:
    """The facts of a line from its matches in rule order: (rule, its phase, its named groups).
    The group values are the line's text, or (start, end) spans when a shape's template is made."""
    result = LineMatch()
    followers: list[dict] = []  # numbers of phase-less rules: decided at the end
    for rule, phase, groups in found:
        if rule.unit and "unit" not in groups:
            groups["unit"] = rule.unit
        result.rules.append(rule.name)
        for key, value in groups.items():
            result.fields.setdefault(key, value)
        numbers = {k: v for k, v in groups.items() if k in _NUMBER_KEYS}
        if rule.progress is None and phase is None:
            followers.append(numbers)
        elif rule.progress is None and result.phase == "evaluating":
            # A generic training shape (a "loss: 0.31") on a line an earlier rule says is evaluation
            # (timm's "Test: [0/29] ... Loss: 0.31"): that phase's numbers, not training progress.
            _merge(result.phase_progress, numbers)
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


_NUMBER_KEYS = frozenset((*PROGRESS_FIELDS, "desc"))


class LineTemplate:
    """What the rules make of every line of one shape, when only digit-blind rules matched it: they
    match every line of the shape at the same places (digits are all alike to them), so the facts
    are the line's text at those spans; a rule's constant unit stays as it is.

    It reads as a LineMatch whose groups are spans (`rules`, `phase`, `detail`, `rule`, `events` as
    the line's; `progress`, `phase_progress`, `fields` hold spans), and gives the line's facts with
    `fill`, or only the parsed progress (`progress_of`) and phase progress (`phase_progress_of`)."""

    def __init__(self, spans: LineMatch, sample: str) -> None:
        self.spans = spans
        self.sample = sample if spans.progress else None  # the line it was made from, for the reader
        self.rules = spans.rules
        self.empty = not spans.rules
        self.phase, self.detail, self.rule = spans.phase, spans.detail, spans.rule
        self.events = spans.events
        self.progress = spans.progress
        self.phase_progress = spans.phase_progress
        self.fields = spans.fields
        self._reader: ProgressReader | None = None

    def fill(self, line: str) -> LineMatch:
        t = self.spans
        return LineMatch(
            phase=t.phase, detail=t.detail, rule=t.rule, rules=list(t.rules),
            progress={k: _text(line, v) for k, v in t.progress.items()},
            phase_progress={k: _text(line, v) for k, v in t.phase_progress.items()},
            fields={k: _text(line, v) for k, v in t.fields.items()},
            events=list(t.events),
        )

    def progress_of(self, line: str) -> LineProgress:
        """`read_fields(self.fill(line).progress)`, read straight from the line."""
        # Made on first use (most shapes, one-off lines, never need one), then called directly.
        self._reader = ProgressReader(self.progress, self.sample)
        self.progress_of = self._reader.read
        self.sample = None  # up to SHAPES_KEPT lines of up to max_line_chars: not kept once read
        return self.progress_of(line)

    def phase_progress_of(self, line: str) -> dict[str, str]:
        return {k: _text(line, v) for k, v in self.phase_progress.items()}


def _text(line: str, value) -> str:
    return value if value.__class__ is str else line[value[0]:value[1]]


_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")
_BYTE_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


def line_shape(line: str) -> bytes | str:
    """The line with its ASCII digits made 0. An ASCII line's shape is bytes (a byte table translates it
    ~10x faster than str.translate); a non-ASCII line's is str: the two kinds never compare equal."""
    if line.isascii():
        return line.encode("ascii").translate(_BYTE_DIGITS_TO_ZERO)
    return line.translate(_DIGITS_TO_ZERO)

SHAPES_KEPT = 4096  # distinct line shapes remembered (a training log prints a handful, over and over)


class _Prefilter:
    """Which rules a line may match, cheaply.

    1. Needed text: a rule is searched only on a line holding one of its needed pieces.
    2. Line shapes: most rules treat every digit alike (no digit literal, range or backreference:
       `digit_blind`), so whether such a rule matches a line depends only on the line with its digits
       made 0, its shape. A training log prints the same few shapes with new numbers; the digit-blind
       rules that matched a shape are remembered, and on a line of a known shape only those (and the
       rules that do read digits) are searched. The search itself still runs on the real line."""

    def __init__(self, checks: list) -> None:
        self.checks = checks  # the (rule, needs, folded) list this plan was made from
        self._tests: list[tuple[int, Rule, tuple[str, ...], bool]] = []
        for i, (rule, needs, folded) in enumerate(checks):
            alternatives = (needs,) if isinstance(needs, str) else tuple(needs)
            if not all(alternatives):
                alternatives = ()  # nothing (or an empty piece) known to be needed: search always
            self._tests.append((i, rule, alternatives, folded))
        self.blind = [digit_blind(rule.pattern) for rule, _, _ in checks]
        self._digit_readers = [t for t in self._tests if not self.blind[t[0]]]
        self._order = [rule for rule, _, _ in checks]
        # For a line of a new shape, every rule's needed text is looked for: each distinct piece once (rules
        # share "loss", "epoch", "/s"...), each piece standing for the rules that need it (bit i: test i).
        self._always = 0
        plain: dict[str, int] = {}
        folded_pieces: dict[str, int] = {}
        for bit, (_, _, alternatives, folded) in enumerate(self._tests):
            if not alternatives:
                self._always |= 1 << bit
            for piece in alternatives:
                into = folded_pieces if folded else plain
                into[piece] = into.get(piece, 0) | 1 << bit
        self._plain = tuple(plain.items())
        self._folded = tuple(folded_pieces.items())
        self._folded_all = 0
        for _, bits in self._folded:
            self._folded_all |= bits
        # shape -> (digit-blind rules that matched it, its template or None, digit readers to ask)
        self._shapes: dict[bytes | str, tuple[tuple[int, ...], LineTemplate | None, list]] = {}

    def candidates(self, line: str) -> tuple[list[tuple[int, Rule]], bytes | str | None, LineTemplate | None]:
        """(index, rule) to search on `line`, in rule order, the line's shape when it is new (the
        caller then reports the digit-blind rules that matched, `remember`), and the shape's template
        when no rule that reads digits is to be searched (then nothing needs searching)."""
        shape = line_shape(line)
        kept = self._shapes.get(shape)
        if kept is None:
            return self._passing_all(line), shape, None
        known, template, readers = kept
        readers = self._passing(line, readers) if readers else readers
        if not readers:
            if template is not None:
                return [], None, template
            return [(i, self._order[i]) for i in known], None, None
        order = self._order
        return sorted([*readers, *((i, order[i]) for i in known)], key=lambda t: t[0]), None, None

    def template(self, line: str) -> LineTemplate | None:
        """The template of the line's known shape when no rule that reads digits is to be searched on
        it: what `candidates` would return alone."""
        # line_shape(line), inline: this runs for every line
        kept = self._shapes.get(
            line.encode("ascii").translate(_BYTE_DIGITS_TO_ZERO) if line.isascii() else line.translate(_DIGITS_TO_ZERO))
        if kept is None or kept[1] is None:
            return None
        if kept[2] and self._passing(line, kept[2]):
            return None
        return kept[1]

    def remember(self, shape: bytes | str, matched: list[int], template: LineTemplate | None = None) -> None:
        if len(self._shapes) >= SHAPES_KEPT:
            self._shapes.clear()  # many one-off lines: start over rather than grow
            if SHAPES_KEPT <= 0:
                return
        blind = self.blind
        self._shapes[shape] = (tuple(i for i in matched if blind[i]), template, self._readers_of(shape))

    def _readers_of(self, shape: bytes | str) -> list:
        """The digit-reading rules whose needed text a line of this shape may hold: a piece in a line is
        the piece's shape in the line's shape (digits are made 0 in place). The others are not asked of
        its lines (`_passing` would drop them on every one)."""
        ascii_line = shape.__class__ is bytes
        text = shape.decode("ascii") if ascii_line else shape
        out = []
        for test in self._digit_readers:
            alternatives, folded = test[2], test[3]
            if not alternatives or (folded and not ascii_line):
                out.append(test)  # asked of every line, or of every non-ASCII one (see _passing)
                continue
            hay = text.lower() if folded else text
            if any(piece.translate(_DIGITS_TO_ZERO) in hay for piece in alternatives):
                out.append(test)
        return out

    def _passing_all(self, line: str) -> list[tuple[int, Rule]]:
        """`_passing(line, self._tests)`, each distinct piece looked for once."""
        bits = self._always
        for piece, rules in self._plain:
            if piece in line:
                bits |= rules
        if self._folded:
            if line.isascii():
                lowered = line.lower()
                for piece, rules in self._folded:
                    if piece in lowered:
                        bits |= rules
            else:
                bits |= self._folded_all  # see _passing: no lowercase check on a non-ASCII line
        tests = self._tests
        out = []
        while bits:
            low = bits & -bits
            test = tests[low.bit_length() - 1]
            out.append((test[0], test[1]))
            bits ^= low
        return out

    @staticmethod
    def _passing(line: str, tests: list) -> list[tuple[int, Rule]]:
        lowered: str | None = None
        ascii_line = line.isascii()
        out = []
        for i, rule, alternatives, folded in tests:
            if alternatives:
                if not folded:
                    text = line
                elif ascii_line:
                    if lowered is None:
                        lowered = line.lower()
                    text = lowered
                else:
                    out.append((i, rule))  # see above: no lowercase check on a non-ASCII line
                    continue
                for piece in alternatives:
                    if piece in text:
                        break
                else:
                    continue
            out.append((i, rule))
        return out


def digit_blind(pattern: re.Pattern[str]) -> bool:
    """Whether `pattern` treats the ASCII digits alike (no digit literal, no range holding some digits
    but not all, no backreference), so that a match on a line is a match on its digits made 0."""
    if not isinstance(pattern.pattern, str):
        return False
    try:
        parsed = _sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # a parser detail changed: trust nothing
        return False
    return _blind(list(parsed))


_DIGITS = range(0x30, 0x3A)
_LEAVES = {_c.ANY, _c.AT, _c.CATEGORY}
_NESTED = {_c.SUBPATTERN, _c.MAX_REPEAT, _c.MIN_REPEAT, _c.ASSERT, _c.ASSERT_NOT}
_NESTED |= {getattr(_c, "POSSESSIVE_REPEAT")} if hasattr(_c, "POSSESSIVE_REPEAT") else set()
_NESTED |= {getattr(_c, "ATOMIC_GROUP")} if hasattr(_c, "ATOMIC_GROUP") else set()


def _blind(items: list) -> bool:
    for op, arg in items:
        if op in (_c.LITERAL, _c.NOT_LITERAL):
            if arg in _DIGITS:
                return False
        elif op in _LEAVES:
            continue
        elif op is _c.IN:
            for item_op, item_arg in arg:
                if item_op in (_c.LITERAL, _c.NOT_LITERAL) and item_arg in _DIGITS:
                    return False
                if item_op in (_c.RANGE, getattr(_c, "RANGE_UNI_IGNORE", _c.RANGE)):
                    lo, hi = item_arg
                    covered = sum(1 for d in _DIGITS if lo <= d <= hi)
                    if 0 < covered < 10:
                        return False
                elif item_op not in (_c.LITERAL, _c.NOT_LITERAL, _c.CATEGORY, _c.NEGATE):
                    return False
        elif op is _c.BRANCH:
            if not all(_blind(list(branch)) for branch in arg[1]):
                return False
        elif op in _NESTED:
            body = arg[-1]
            if not _blind(list(body)):
                return False
        else:  # backreferences, conditionals, anything not known to be digit-blind
            return False
    return True


def required_any(pattern: re.Pattern[str], folded: bool = False) -> tuple[str, ...]:
    """Alternative pieces of text, one of which every match of `pattern` contains: a plain run
    (one piece), or one piece from each branch of an alternation (`step|iter`). Empty when unsure.
    The best-known requirement is chosen: the one whose shortest piece is longest.

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
    best = _any_of(list(parsed), folded)
    if not best:
        return ()
    if not folded:
        return best
    out: list[str] = []
    for piece in best:
        parts = [p for p in re.split(r"[^\x00-\x7f]+", piece.lower()) if p]
        if not parts:
            return ()  # a branch made only of non-ASCII letters: nothing is known to be needed
        out.append(max(parts, key=len))
    return tuple(dict.fromkeys(out))


def _any_of(items: list, folded: bool) -> tuple[str, ...] | None:
    """The alternatives every match of this sequence contains (None: nothing known)."""
    best: tuple[str, ...] | None = None

    def consider(alternatives: tuple[str, ...] | None) -> None:
        nonlocal best
        if alternatives and (best is None or _strength(alternatives) > _strength(best)):
            best = alternatives

    run = ""
    for op, arg in items:
        if op is _c.LITERAL:
            run += chr(arg)
            continue
        if run:
            consider((run,))
            # The parser pulls the common start of an alternation's branches out before it (": [" | ":  ["
            # is ": " then "[" | " ["): the run with each branch's own start is needed as well.
            heads = _branch_heads(op, arg)
            if heads:
                consider(tuple(dict.fromkeys(run + head for head in heads)))
            run = ""
        if op is _c.SUBPATTERN:
            if folded or not arg[1] & re.IGNORECASE:  # (?i:...) inside: letters of either case
                consider(_any_of(list(arg[-1]), folded))
        elif op is _c.BRANCH:
            alternatives: list[str] = []
            for branch in arg[1]:
                found = _any_of(list(branch), folded)
                if not found:
                    alternatives = []
                    break  # a branch with no known text: the alternation needs none
                alternatives.extend(found)
            consider(tuple(dict.fromkeys(alternatives)))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and arg[0] >= 1:
            consider(_any_of(list(arg[2]), folded))  # at least once: its text is needed
    if run:
        consider((run,))
    return best


def _branch_heads(op, arg) -> list[str] | None:
    """The literal text each branch of an alternation starts with (a non-capturing group of one); None when
    a branch starts with anything else."""
    if op is _c.SUBPATTERN and len(arg[-1]) == 1 and arg[1] == 0 and arg[2] == 0:
        op, arg = list(arg[-1])[0]
    if op is not _c.BRANCH:
        return None
    heads = []
    for branch in arg[1]:
        head = ""
        for item_op, item_arg in branch:
            if item_op is not _c.LITERAL:
                break
            head += chr(item_arg)
        if not head:
            return None
        heads.append(head)
    return heads


def _strength(alternatives: tuple[str, ...]) -> tuple[int, int]:
    """Longer pieces are rarer in a line; fewer alternatives, fewer chances."""
    return min(len(a) for a in alternatives), -len(alternatives)


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
