"""One job across hosts: per-host jobs of the same run joined into one view, judged over all its ranks.

Each host's tracker part sees only its own processes. Processes of one run on different hosts share
their launcher's variables: the same SLURM_JOB_ID, the same TORCHELASTIC_RUN_ID, or the same
MASTER_ADDR + MASTER_PORT (unless that address means "this host": localhost / 127.x / ::1, which every
single-host torchrun uses). Per-host jobs that share any of these keys, on two hosts or more, become
one `JobView` with `hosts`, `ranks` and `parts`; its phase is the worst of its parts, and the rank that
holds the others up is named in the evidence (culprit.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from operator import attrgetter
from typing import Iterable

from ..model import GpuSample, ProcInfo
from ..views import JobView, PhaseEntry, RankView
from ..vocab import PHASE_URGENCY
from .culprit import Culprit, find_culprit
from .discovery import is_python, launcher_kind
from .job_actions import KILL
from .activity import format_history
from ..short_id import multi_parts, short_id

STOPPED_GRACE_S = 3.0  # a rank stopped this long is no passing py-spy pause: the job is stalled
MAX_HISTORY = 200


def is_this_host(addr: str) -> bool:
    """A MASTER_ADDR that names the host it is read on: it ties nothing across hosts."""
    a = addr.strip().lower()
    return a in ("", "localhost", "::1", "0.0.0.0", "ip6-localhost") or a.startswith("127.") or a.endswith(
        ".localhost")


def run_keys(dist: dict[str, str]) -> set[str]:
    """What ties a process to the other processes of its run, on any host."""
    keys = set()
    if dist.get("SLURM_JOB_ID"):
        keys.add(f"slurm job {dist['SLURM_JOB_ID']}")
    run_id = dist.get("TORCHELASTIC_RUN_ID")
    if run_id and run_id != "none":  # torchrun's default id: the same for every unnamed run
        keys.add(f"torchrun run {run_id}")
    addr, port = dist.get("MASTER_ADDR"), dist.get("MASTER_PORT")
    if addr and port and not is_this_host(addr):
        keys.add(f"rendezvous {addr}:{port}")
    return keys


def overridable(phase: str, detail: str | None) -> bool:
    """Whether a stopped culprit rank says more than the verdict: anything but a crash, or a stall the
    engine could only call `no-progress` (an `nccl-spin` says more about the GPUs, and stays)."""
    return phase != "crashed" and (phase != "stalled" or detail == "no-progress")


_dist = attrgetter("dist")


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class PartFacts:
    """What the join reads of one per-host job: its view, its processes, its host's GPUs, its log."""

    view: JobView
    procs: tuple[ProcInfo, ...]  # its processes as last seen (an ended job's last live ones)
    live: frozenset[int]  # pids alive in the latest frame
    gpus: tuple[GpuSample, ...]
    last_log_at: float | None
    keys: frozenset[str] = frozenset()  # its run keys (part_keys of procs)


def part_keys(procs: Iterable[ProcInfo]) -> set[str]:
    keys: set[str] = set()
    for p in procs:
        if p.dist:
            keys |= run_keys(dict(p.dist))
    return keys


def rank_processes(procs: Iterable[ProcInfo]) -> list[ProcInfo]:
    """The rank processes of a per-host job: those with a RANK (or SLURM_PROCID) that are not a launcher
    agent (a launcher may carry a stale RANK from its own environment)."""
    procs = [p for p in procs if launcher_kind(p) is None]
    with_rank = [p for p in procs if dict(p.dist).get("RANK") is not None]
    # SLURM_PROCID alone: a Python task of an srun step. The batch script and srun carry SLURM_PROCID=0
    # too (the batch step's), and are no rank.
    return with_rank or [p for p in procs if dict(p.dist).get("SLURM_PROCID") is not None and is_python(p)]


_NO_FACTS = ((), frozenset(), False)


def run_facts(job) -> tuple[list[ProcInfo], frozenset[str], bool]:
    """(its processes as last seen, its run keys, whether it has several ranks) of one per-host job.
    The keys and the rank flag are kept with the job (`job.view_parts`) while its processes' run
    variables hold (compared as they are: a process's are read once, the same tuple every frame), not
    made again from a new list each frame. (`tracker.views` asks once per view made: per frame.)"""
    if job is None:
        return _NO_FACTS
    procs_list = job.procs or job.last_procs
    dists = tuple(map(_dist, procs_list))
    kept = job.view_parts.get("run_facts")  # (the run variables, the keys, the rank flag)
    if kept is not None and kept[0] == dists:  # (the usual frame: the same run variables)
        return procs_list, kept[1], kept[2]
    keys = frozenset(part_keys(procs_list))
    ranked = bool(any(dists) and len(rank_processes(procs_list)) > 1)
    job.view_parts["run_facts"] = (dists, keys, ranked)
    return procs_list, keys, ranked


def ranks_of(part: PartFacts) -> list[RankView]:
    """Every rank of one per-host job, with its GPU(s) and state."""
    v = part.view
    out = []
    for p in rank_processes(part.procs):
        env = dict(p.dist)
        mine = {p.pid, *(c.pid for c in p.children)}
        gpus = [g for g in part.gpus if any(gp.pid in mine for gp in g.processes)]
        utils = [g.util_pct for g in gpus if g.util_pct is not None]
        powers = [g.power_w for g in gpus if g.power_w is not None]
        limits = [g.power_limit_w for g in gpus if g.power_limit_w is not None]
        state = p.state if v.alive and p.pid in part.live else "gone"
        out.append(RankView(
            host=v.host, pid=p.pid, start_ticks=p.start_ticks,
            rank=_int(env.get("RANK") or env.get("SLURM_PROCID")), local_rank=_int(env.get("LOCAL_RANK")),
            world_size=_int(env.get("WORLD_SIZE")),
            node_rank=_int(env.get("GROUP_RANK") or env.get("NODE_RANK") or env.get("SLURM_NODEID")),
            gpus=tuple(g.index for g in gpus), util_pct=max(utils) if utils else None,
            power_w=sum(powers) if powers else None,
            power_limit_w=sum(limits) if limits and len(limits) == len(powers) else None, state=state, last_log_at=part.last_log_at, job_id=v.id,
        ))
    return out


def group_parts(parts: list[PartFacts]) -> list[tuple[str, list[PartFacts]]]:
    """Per-host jobs joined by shared run keys (transitively); only groups over two hosts or more."""
    keyed = [(part, part.keys or (part_keys(part.procs) if part.procs else frozenset())) for part in parts]
    groups: list[tuple[set[str], list[PartFacts]]] = []
    for part, keys in keyed:
        if not keys:
            continue
        joined = [g for g in groups if g[0] & keys]
        merged_keys, members = set(keys), [part]
        for g in joined:
            merged_keys |= g[0]
            members = g[1] + members
            groups.remove(g)
        groups.append((merged_keys, members))
    out = []
    for keys, members in groups:
        if len({m.view.host for m in members}) > 1:
            out.append((min(keys, key=_key_order), members))
    return out


def _key_order(key: str) -> tuple[int, str]:
    return (0 if key.startswith("slurm") else 1 if key.startswith("torchrun") else 2, key)


class MultiNodeJobs:
    """Joins per-host job views into multi-node views. Keeps what a view alone cannot say: since when a
    rank has been stopped, and each joined job's phase history."""

    def __init__(self) -> None:
        self.joined: dict[str, str] = {}  # per-host job id -> the multi-node job's id (as of the last join)
        self._stopped_since: dict[tuple[str, int, int], float] = {}
        self._history: dict[str, list[tuple[str, float]]] = {}

    def join(self, views: list[JobView], tracker, now: float | None,
             facts: list[tuple] | None = None) -> list[JobView]:
        """The tracker's per-host views with the parts of each multi-node run replaced by one view.
        `facts`: each view's job's `run_facts`, in the same order (the tracker gathers them as it makes
        the views, while each job is at hand); found by id when not given."""
        if facts is None:
            facts = [run_facts(tracker.state(v.id)) for v in views]
        _, keys_of_each, ranked_of_each = zip(*facts) if facts else ((), (), ())
        if not any(keys_of_each) and not any(ranked_of_each):
            # the common case: nothing to join, no job of several ranks (no part facts to gather)
            self.joined = {}
            self._stopped_since.clear()
            return views
        parts = []
        for v, (procs_list, keys, ranked) in zip(views, facts):
            if not keys and not ranked:
                parts.append(PartFacts(v, (), frozenset(), (), None))
                continue
            job = tracker.state(v.id)
            last_log = max((b.last_growth for b in job.logs.values() if b.last_growth is not None), default=None)
            parts.append(PartFacts(v, tuple(procs_list), frozenset(p.pid for p in job.procs),
                                   tracker.host_gpus(v.host), last_log, keys))
        if now is None:
            now = max((j.last_seen for j in tracker.states()), default=0.0)
        views, self.joined = self.combine(parts, now)
        return views

    def combine(self, parts: list[PartFacts], now: float) -> tuple[list[JobView], dict[str, str]]:
        """(the views every reader gets, per-host job id -> the joined job's id)."""
        groups = group_parts(parts)
        joined: dict[str, str] = {}
        views: list[JobView] = []
        stopped_seen: set[tuple[str, int, int]] = set()
        for key, members in groups:
            view = self._join(key, members, now, stopped_seen)
            views.append(view)
            joined.update((m.view.id, view.id) for m in members)
        # A job of several ranks on one host (torchrun --nproc_per_node 8) is judged over its ranks too.
        rest = [self._ranked(p, now, stopped_seen) if p.procs and p.view.id not in joined else p.view
                for p in parts if p.view.id not in joined]
        for k in [k for k in self._stopped_since if k not in stopped_seen]:
            del self._stopped_since[k]
        for k in [k for k in self._history if k not in set(joined.values())]:
            del self._history[k]  # a run no longer joined (dismissed, or down to one host)
        return rest + views, joined

    def _ranks_and_culprit(self, members: list[PartFacts], now: float,
                           stopped_seen: set) -> tuple[list[RankView], Culprit | None]:
        """Every rank of the members in rank order, the culprit marked; since when each stopped rank is noted."""
        ranks = [r for m in members for r in ranks_of(m)]
        ranks.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.host, r.pid))
        for r in ranks:
            if r.state == "T":
                k = (r.host, r.pid, r.start_ticks)
                stopped_seen.add(k)
                self._stopped_since.setdefault(k, now)
        culprit = find_culprit(ranks, now)
        if culprit is not None:
            ranks = [dataclasses.replace(r, culprit=True, note=culprit.notes[i]) if i in culprit.notes else r
                     for i, r in enumerate(ranks)]
        return ranks, culprit

    def _stopped_rank_since(self, ranks: list[RankView], now: float) -> float | None:
        """Since when a culprit rank has been stopped, once that is no passing pause (STOPPED_GRACE_S)."""
        stopped_at = [self._stopped_since[(r.host, r.pid, r.start_ticks)] for r in ranks
                      if r.culprit and r.state == "T"]
        return min(stopped_at) if stopped_at and now - min(stopped_at) >= STOPPED_GRACE_S else None

    def _ranked(self, part: PartFacts, now: float, stopped_seen: set) -> JobView:
        """A single-host job of several ranks: its ranks listed, the one that holds the others up named."""
        ranks, culprit = self._ranks_and_culprit([part], now, stopped_seen)
        v = part.view
        if culprit is None or not v.alive:
            return dataclasses.replace(v, ranks=tuple(ranks))
        phase, detail, since, confidence, advice, actions = self._culprit_verdict(
            culprit, ranks, now, v.phase, v.detail, v.since, v.confidence, v.advice, v.actions)
        history = v.history if phase == v.phase else (*v.history, PhaseEntry(phase, since))
        return dataclasses.replace(
            v, phase=phase, detail=detail, since=since, confidence=confidence,
            evidence=(culprit.summary, *v.evidence), advice=advice, actions=actions, ranks=tuple(ranks),
            history=history, history_text=format_history([(h.phase, h.since) for h in history], now))

    def _culprit_verdict(self, culprit: Culprit, ranks: list[RankView], now: float, phase: str,
                         detail: str | None, since: float, confidence: float, advice: str,
                         actions: tuple[str, ...]) -> tuple:
        """(phase, detail, since, confidence, advice, actions) once a culprit rank is known."""
        stopped_since = self._stopped_rank_since(ranks, now)
        if stopped_since is not None and overridable(phase, detail):
            # One stopped rank stops every collective: the run cannot move, whatever the others show.
            phase, detail, since, confidence = "stalled", "rank-stopped", stopped_since, 0.9
        if phase == "stalled":
            advice, actions = culprit.advice, tuple(dict.fromkeys((*culprit.actions, *actions)))
        return phase, detail, since, confidence, advice, actions

    def _join(self, key: str, members: list[PartFacts], now: float, stopped_seen: set) -> JobView:
        ranks, culprit = self._ranks_and_culprit(members, now, stopped_seen)
        # Rank 0's host leads (its log is the one people read); parts in rank order after it.
        # On that host a part with a log leads: under srun the batch script's part holds the one log.
        order = {r.job_id: i for i, r in reversed(list(enumerate(ranks)))}
        host_order = {r.host: i for i, r in reversed(list(enumerate(ranks)))}
        members = sorted(members, key=lambda m: (host_order.get(m.view.host, len(order)), not m.view.logs,
                                                 order.get(m.view.id, len(order)), m.view.host))
        lead = members[0].view
        # srun pipes every node's rank output into the batch step's one log: a part without a log of its
        # own that is "stalled" for want of progress says nothing while a part with a log is alive.
        logged = any(m.view.logs and m.view.alive for m in members)
        judged = [m for m in members if not (logged and not m.view.logs and m.view.phase == "stalled"
                                             and m.view.detail == "no-progress")] or members
        worst = min(judged, key=lambda m: PHASE_URGENCY.get(m.view.phase, 3)).view
        all_ended = all(not m.view.alive for m in members)
        phase, detail, since = worst.phase, worst.detail, worst.since
        confidence, advice, actions = worst.confidence, worst.advice, worst.actions
        evidence = [f"{worst.host}: {e}" for e in worst.evidence]
        if culprit is not None and not all_ended:
            evidence = [culprit.summary, *evidence]
            phase, detail, since, confidence, advice, actions = self._culprit_verdict(
                culprit, ranks, now, phase, detail, since, confidence, advice, actions)
        if phase == "crashed" and not all_ended:
            # One host's part has died; the others wait for it until their watchdog fires: end them.
            actions = tuple(dict.fromkeys((KILL, *actions)))
        job_id = f"multi:{key}"
        history = self._note_phase(job_id, phase, since)
        hosts = tuple(dict.fromkeys(m.view.host for m in members))
        return dataclasses.replace(
            lead, id=job_id, name=lead.name, phase=phase, detail=detail, since=since, confidence=confidence,
            evidence=tuple(evidence), advice=advice, actions=actions,
            alive=any(m.view.alive for m in members),
            ended_at=None if not all_ended else max((m.view.ended_at or 0.0) for m in members),
            exit_code=worst.exit_code, exit_signal=worst.exit_signal,
            history=tuple(PhaseEntry(p, s) for p, s in history), history_text=format_history(history, now),
            events=tuple(e for m in members for e in m.view.events),
            hosts=hosts, ranks=tuple(ranks), parts=tuple(m.view.id for m in members), run_key=key,
            short_id=short_id(multi_parts(key)),
        )

    def parts_of(self, job_id: str) -> list[str]:
        """The per-host job ids a multi-node job joins (as of the last join); [] for any other id."""
        return [part for part, joined in self.joined.items() if joined == job_id]

    def _note_phase(self, job_id: str, phase: str, since: float) -> list[tuple[str, float]]:
        history = self._history.setdefault(job_id, [])
        if not history or history[-1][0] != phase:
            history.append((phase, since))
            del history[:-MAX_HISTORY]
        return history


__all__ = ["MultiNodeJobs", "PartFacts", "run_keys", "is_this_host", "group_parts", "ranks_of", "Culprit"]
