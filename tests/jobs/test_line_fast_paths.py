"""The log line path's shortcuts give what the full path gives, on captured logs and hostile bytes:
- a line of a known shape is read from its template (`LineTemplate`, its `ProgressReader`) with no
  search and no LineMatch: the interpreter's state equals one that searches every rule on every line;
- a chunk of whole lines is decoded at once (`LogBuffer._feed_whole_lines`): the same lines as
  decoding line by line."""

from __future__ import annotations

import random
import re

from gpuwatch_tui.jobs.interpret import LogInterpreter
from gpuwatch_tui.jobs.logtail import LogBuffer
from gpuwatch_tui.jobs.progress import ProgressReader, ProgressTracker, read_fields
from gpuwatch_tui.jobs.rules import RuleSet, builtin_rules
from gpuwatch_tui.model import TailChunk

from .helpers import LOGS
from .test_rule_prefilter import Unfiltered
from .test_rule_shapes import variants


class EveryRuleEveryLine(Unfiltered):
    """Every rule searched on every line, no shape remembered: the reference."""

    def template(self, line):
        return None

    def match(self, line):
        if self._plan is not None:
            self._plan._shapes.clear()  # nothing known of any shape
        return super().match(line)


class LineByLine(LogBuffer):
    """Every chunk fed through the general path (line by line, frames and cuts)."""

    shortcuts = False


def state(interp: LogInterpreter) -> str:
    """Everything the rest of gpuwatch reads of an interpreter (repr: a NaN loss equals itself)."""
    p = interp.progress
    return repr((
        interp.seq, interp.hint, interp.failures, interp.failure, interp.finished_at, interp.finished_text,
        interp.exit_code, interp.exit_rank, interp.signal, interp.phase_progress, interp.phase_progress_phase,
        interp.last_progress_seq, interp.last_progress_at, interp.last_match,
        interp.restart_marker, interp.in_traceback, p.current, list(p.history), p.last_advance_at,
    ))


def captured_texts() -> list[tuple[str, list[str]]]:
    """Each captured log's lines as the tail shows them, then again with other digits (the next steps
    of the same run: lines of known shapes), with progress-bar frames as separate lines."""
    out = []
    for path in [*sorted(LOGS.glob("*.log")), *sorted((LOGS.parent / "published_logs").glob("*/*.log"))]:
        text = path.read_bytes().decode("utf-8", "replace")
        lines = [part for line in text.split("\n") for part in line.split("\r") if part]
        out.append((path.name, lines + [v for line in lines for v in variants(line)[1:]]))
    return out


def test_template_reads_equal_searching_every_rule_on_captured_logs():
    checked = templated = 0
    for name, lines in captured_texts():
        fast = LogInterpreter(RuleSet(builtin_rules()), ProgressTracker())
        slow = LogInterpreter(EveryRuleEveryLine(builtin_rules()), ProgressTracker())
        for i, line in enumerate(lines):
            now = 1000.0 + i * 0.7
            templated += fast.rules.template(line) is not None
            if i % 5 == 4:  # an unterminated frame now and then (a bar's latest frame)
                fast.feed_live(line, now)
                slow.feed_live(line, now)
            else:
                fast.feed_lines([line], now)
                slow.feed_line(line, now)
            assert state(fast) == state(slow), (name, i, line)
            checked += 1
    assert checked > 3000 and templated > 1500  # the corpus takes the shortcut, and often


def test_progress_reader_equals_parsing_the_fields_on_every_line_of_a_shape():
    rules = RuleSet(builtin_rules())
    lines = [line for _, texts in captured_texts() for line in texts]
    lines += [f"step {s}/100000 loss {2.5 / s:.4f} lr 3.0e-04 tokens/s {90000 + 37 * s}" for s in range(1, 400, 7)]
    lines += [f" 40%|████      | {s}/{2 * s} [00:{s % 60:02d}<01:{s % 60:02d},  {s}.{s % 10}1it/s, loss=1.{s}]"
              for s in range(10, 99)]
    readers = 0
    for line in lines:
        rules.match(line)
        t = rules.template(line)
        if t is None or not t.progress:
            continue
        readers += 1
        assert repr(t.progress_of(line)) == repr(read_fields(t.fill(line).progress)), (line, t._reader.source)
    assert readers > 250


def test_progress_reader_reads_odd_numbers_as_parse_number_does():
    # float() fast only where parse_number is float(): no "_", no spaces, ending in a digit.
    sample = "a 1_000 b  12 c 3. d 2.5k f 1e-3"

    def at(text: str) -> tuple[int, int]:
        return sample.index(text), sample.index(text) + len(text)

    spans = {"step": at("1_000"), "total": at(" 12"), "loss": at("3."), "rate": at("2.5k"), "unit": "Mtok/s",
             "lr": at("1e-3")}
    reader = ProgressReader(spans, sample)
    fields = {k: (v if isinstance(v, str) else sample[v[0]:v[1]]) for k, v in spans.items()}
    assert reader.read(sample) == read_fields(fields)
    assert reader.source.count("_float(") == 1 and reader.source.count("_number(") == 4  # lr only
    got = reader.read(sample)
    assert (got.step, got.total, got.loss, got.rate, got.unit, got.lr) == (None, 12.0, 3.0, 2.5e9, "tok/s", 1e-3)


def feed_chunks(buf: LogBuffer, data: bytes, sizes: list[int], seed: int) -> list:
    """Feed `data` in chunks of `sizes`, some of them reset, with skipped or cut bytes; what the buffer
    shows after each."""
    rng = random.Random(seed)
    out, pos, t, size_on_disk = [], 0, 1000.0, 100
    for size in sizes:
        t += 1.0
        piece = data[pos:pos + size]
        size_on_disk += size
        reset = rng.random() < 0.05
        skipped = rng.choice([0] * 12 + [7])
        cut = ((rng.randint(0, len(piece)), rng.randint(1, 99)),) if rng.random() < 0.08 else ()
        buf.feed(TailChunk("k", "/log", piece, reset, skipped, rng.choice([None, size_on_disk, 10 ** 6]),
                           rng.choice([None, t - 5.0]), None, cut), t)
        buf.tick(t)
        new = buf.take_new()
        kept = set(buf.records())
        # Numbered and timed as the kept lines are (the newest ones are still kept: up to 2 markers a chunk).
        assert all(line in kept for line in new if line.seq > buf.total_lines - 10), (new, kept)
        assert [line.seq for line in new] == list(range(buf.total_lines - len(new) + 1, buf.total_lines + 1))
        out.append((new, buf.live, buf.total_bytes, buf.last_growth, buf.resets, buf.skipped_bytes,
                    buf.total_lines))
        pos += size
    return out


def test_the_common_chunk_paths_equal_the_general_path_on_hostile_bytes():
    rng = random.Random(11)
    pieces = [b"step 1/10 loss 2.5\n", b"\xe2\x82\n", b"\xff\xfe bad\n", b"caf\xc3\xa9 ok\n", b"\x1b]0;title\x07x\n",
              b"\x1b[31mred\x1b[0m\n", b"tab\there\n", b"\x9b2J\n", b"\xe2\x80\xaeevil\n", b"\n", b"no newline",
              b"bar 10%\rbar 20%\r", b"\xf0\x9f\x98", b"\x80\n", b"x" * 3000 + b"\n", b"\x00\x07bell\n"]
    shortcut = 0
    for case in range(200):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        sizes, left = [], len(data)
        while left:
            # Cuts at line ends (whole-line chunks) and anywhere.
            start = len(data) - left
            ends = [i + 1 for i in range(start, len(data)) if data[i:i + 1] == b"\n"]
            size = ends[rng.randrange(len(ends))] - start if ends and rng.random() < 0.7 else rng.randint(1, left)
            sizes.append(size)
            left -= size
        fast, slow = LogBuffer(50, 200, 2.0), LineByLine(50, 200, 2.0)
        taken = []
        fast._feed_whole_lines = lambda data, now, real=fast._feed_whole_lines: taken.append(1) or real(data, now)
        assert feed_chunks(fast, data, sizes, case) == feed_chunks(slow, data, sizes, case), data
        assert fast.records() == slow.records()
        shortcut += len(taken)
    assert shortcut > 200  # the shortcut was taken, often


def test_a_line_whose_digits_a_rule_reads_is_searched_not_read_from_its_template():
    import re

    from gpuwatch_tui.jobs.rules import Rule

    rules = RuleSet([Rule("first-step", re.compile(r"^Step 1: "), phase="compiling"),
                     Rule("steps", re.compile(r"^Step (?P<step>\d+): (?P<loss>\d+)"))], desc_phases={})
    interp = LogInterpreter(rules, ProgressTracker())
    interp.feed_lines(["Step 2: 5", "Step 3: 4"], 1000.0)  # the shape is known: a template
    assert rules.template("Step 4: 3") is not None and interp.hint is None
    assert rules.template("Step 1: 3") is None  # "Step 1: " may match: searched
    interp.feed_lines(["Step 1: 3"], 1001.0)
    assert interp.hint is not None and interp.hint.phase == "compiling"
    assert interp.phase_progress == {"step": "1", "loss": "3"}  # a compiling line's numbers are not training's
    assert interp.progress.current.step == 3.0 and interp.last_match.rules == ["first-step", "steps"]


def test_digit_reading_rules_asked_per_shape_give_the_same_matches_as_every_rule():
    import re

    from gpuwatch_tui.jobs.rules import Rule

    made = [Rule("first-epoch", re.compile(r"epoch 1 (?P<loss>\d+)", re.IGNORECASE), phase="training"),
            Rule("step-two", re.compile(r"Step 2: (?P<step>\d+)"), phase="compiling"),
            Rule("first-step", re.compile(r"step 1 (?P<loss>\d+)", re.IGNORECASE), phase="compiling"),
            Rule("any", re.compile(r"(?P<step>\d+)/(?P<total>\d+)"))]
    lines = [f"{word} {a} {b}/{c}" for word in ("EPOCH", "epoch", "Épöch", "Step", "Step 2:", "ΕPOCH")
             for a in (1, 2, 7) for b in (10, 20) for c in (30, 1)]
    lines += [f"{word} {a}: {b}" for word in ("Step", "STEP", "\u017ftep") for a in range(4) for b in (5, 15)]
    lines += [f"\u017ftep {a} {b}" for a in range(4) for b in (5, 15)]  # long s: "s" to re.IGNORECASE
    fast, slow = RuleSet(made), EveryRuleEveryLine(made)
    for line in lines * 2:  # twice: the second time, every shape is known
        assert fast.match(line) == slow.match(line), line
        t = fast.template(line)
        assert t is None or t.fill(line) == slow.match(line), line


def test_progress_reader_applies_a_fixed_unit_prefix_once_per_shape():
    for sample, fixed in [("rate 2.42 Mtok/s", True), ("rate 2.42 tok/s", True), ("rate 2.42 k2tok/s", False),
                          ("rate 2.4_2 Mtok/s", False)]:
        rate_end = sample.index(" ", 5)
        spans = {"rate": (5, rate_end), "unit": (rate_end + 1, len(sample))}
        reader = ProgressReader(spans, sample)
        assert ("_scaled" not in reader.source) == fixed, reader.source
        for line in (sample, sample.replace("2.42", "7.05").replace("2.4_2", "7.0_5")):
            fields = {k: line[a:b] for k, (a, b) in spans.items()}
            assert repr(reader.read(line)) == repr(read_fields(fields)), (line, reader.source)


def test_a_bar_whose_words_name_its_phase_is_read_from_its_shape_unless_digits_name_it():
    """A bar's phase comes from its words (desc_phases): patterns that treat every digit alike give the same
    phase on every line of the bar's shape, so its template is used; one that reads a digit ("stage 2")
    gives none (stage 1 and stage 2 have one shape)."""
    bars = [f"{desc}: {p:3d}%|{'#' * (p // 10):<10}| {p}/100 [00:{p:02d}<00:10, 9.{p % 10}it/s]"
            for desc in ("Training", "Evaluating", "stage 1", "stage 2", "stage 1") for p in range(10, 16)]
    digit_words = {"evaluating": re.compile("stage 2"), "loading": re.compile(r"(?i)eval")}
    for desc_phases, templates in ((None, True), (digit_words, False)):
        fast = LogInterpreter(RuleSet(builtin_rules(), desc_phases), ProgressTracker())
        slow_rules = EveryRuleEveryLine(builtin_rules())
        slow_rules.desc_phases = fast.rules.desc_phases
        slow = LogInterpreter(slow_rules, ProgressTracker())
        for i, line in enumerate(bars):
            now = 1000.0 + i
            fast.feed_lines([line], now)
            slow.feed_line(line, now)
            assert state(fast) == state(slow), (desc_phases is None, line)
        assert all(fast.rules.template(line) is not None for line in bars) is templates
