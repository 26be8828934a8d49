"""Rules over what the monitor knows -> alerts. Pure: it is given the views and the time.

Each (rule, subject) is a small state machine: the condition starts holding (a job entered the
phase, a host left `connected`, a GPU began spinning), it must keep holding for the rule's hold
time (debounce: a reconnect blip or a one-sample stall does not page anyone), then it fires once.
It fires again only after the condition has cleared and come back, and not within `repeat_after`
of the last time (rate limit per subject). A job first seen already crashed does not fire: alerts
are about changes this watch saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..jobs.logtail import sanitize_line
from ..views import JobView
from ..vocab import fmt_duration
from .events import AlertEvent
from .triggers import GPU_SPIN, HOST_DOWN
from .settings import AlertRule, AlertsConfig

# Terminal phases cannot flap: they fire at once unless the rule says otherwise.
IMMEDIATE = ("crashed", "finished")


@dataclass
class _Watch:
    holding_since: float | None = None  # when the condition started holding (None: not holding)
    fired: bool = False  # fired during this holding spell
    last_fired: float | None = None
    baseline: bool = True  # first look: a condition already holding is not news


@dataclass(frozen=True)
class HostFacts:
    """What the engine needs about a host: its state and its GPUs' latest readings."""

    name: str
    state: str
    error: str | None = None
    gpus: tuple[tuple[int, float | None, float | None, float | None], ...] = ()  # (index, util, power, limit)


def host_facts_from_store(store) -> list[HostFacts]:
    out = []
    for rec in store.hosts.values():
        gpus = tuple((i, r.latest.util_pct, r.latest.power_w, r.latest.power_limit_w) for i, r in sorted(rec.gpus.items()))
        out.append(HostFacts(rec.name, rec.state, rec.error, gpus))
    return out


class AlertEngine:
    def __init__(self, config: AlertsConfig) -> None:
        self.config = config
        self._watches: dict[tuple[int, str], _Watch] = {}
        self._ever_connected: set[str] = set()

    def hold_for(self, rule: AlertRule) -> float:
        if rule.hold_s is not None:
            return rule.hold_s
        if rule.on in IMMEDIATE:
            return 0.0
        if rule.on == GPU_SPIN:
            return self.config.gpu_spin_s
        return self.config.debounce_s

    def observe(self, jobs: Iterable[JobView], hosts: Iterable[HostFacts], now: float) -> list[AlertEvent]:
        jobs, hosts = list(jobs), list(hosts)
        events: list[AlertEvent] = []
        for host in hosts:
            if host.state == "connected":
                self._ever_connected.add(host.name)
        for i, rule in enumerate(self.config.rules):
            if rule.on == HOST_DOWN:
                for host in hosts:
                    if rule.matches(host.name, None):
                        down = host.state != "connected" and host.name in self._ever_connected
                        self._step(i, rule, host.name, down, now, events, lambda h=host: self._host_event(rule, h))
            elif rule.on == GPU_SPIN:
                for host in hosts:
                    if not rule.matches(host.name, None):
                        continue
                    for index, util, power, limit in host.gpus:
                        spinning = _spinning(rule, util, power, limit) and host.state == "connected"
                        self._step(i, rule, f"{host.name}:gpu{index}", spinning, now, events,
                                   lambda h=host, g=(index, util, power, limit): self._gpu_event(rule, h, g))
            else:
                for job in jobs:
                    if rule.matches(job.host, job.name):
                        self._step(i, rule, job.id, job.phase == rule.on, now, events,
                                   lambda j=job: self._job_event(rule, j, now))
        return events

    def _step(self, index: int, rule: AlertRule, subject: str, holding: bool, now: float,
              events: list[AlertEvent], make) -> None:
        watch = self._watches.setdefault((index, subject), _Watch())
        first_look, watch.baseline = watch.baseline, False
        if not holding:
            watch.holding_since, watch.fired = None, False
            return
        if watch.holding_since is None:
            watch.holding_since = now
            if first_look and rule.on != GPU_SPIN:
                watch.fired = True  # already so when we first looked: not a change we saw
        if watch.fired or now - watch.holding_since < self.hold_for(rule):
            return
        watch.fired = True
        if watch.last_fired is not None and now - watch.last_fired < self.config.repeat_after_s:
            return  # rate limit: this subject alerted a moment ago
        watch.last_fired = now
        event = make()
        events.append(AlertEvent(**{**event, "sinks": rule.sinks, "rule": rule.name, "time": now}))

    @staticmethod
    def _job_event(rule: AlertRule, job: JobView, now: float) -> dict:
        words = {"crashed": "crashed", "stalled": "stalled", "silent": "is silent", "finished": "finished"}[rule.on]
        extra = ""
        if rule.on == "crashed" and (job.exit_code is not None or job.exit_signal is not None):
            extra = f" (exit {job.exit_code})" if job.exit_signal is None else f" (signal {job.exit_signal})"
        message = sanitize_line(f"{job.phase}{' (' + job.detail + ')' if job.detail else ''} for "
                                f"{fmt_duration(max(0.0, now - job.since))}"
                                + (f"; {job.advice}" if job.advice else ""))
        return {"trigger": rule.on, "subject": job.id, "host": job.host, "job": job.name, "job_id": job.id,
                "short_id": job.short_id or None,
                "title": sanitize_line(f"{job.label} on {job.host} {words}{extra}"), "message": message,
                "evidence": tuple(sanitize_line(e) for e in job.evidence[:8])}

    @staticmethod
    def _host_event(rule: AlertRule, host: HostFacts) -> dict:
        return {"trigger": HOST_DOWN, "subject": host.name, "host": host.name,
                "title": sanitize_line(f"{host.name} is {host.state}"),
                "message": sanitize_line(host.error or f"the host left connected: {host.state}")}

    @staticmethod
    def _gpu_event(rule: AlertRule, host: HostFacts, gpu: tuple) -> dict:
        index, util, power, limit = gpu
        return {"trigger": GPU_SPIN, "subject": f"{host.name}:gpu{index}", "host": host.name, "gpu": index,
                "title": sanitize_line(f"GPU {index} on {host.name} spins at idle power"),
                "message": f"{util:.0f}% util at {power:.0f} W of {limit:.0f} W: a hung collective looks like this",
                "evidence": (f"util {util:.0f}%", f"power {power:.0f} W (limit {limit:.0f} W)")}


def _spinning(rule: AlertRule, util, power, limit) -> bool:
    if util is None or power is None or not limit:
        return False
    return util >= rule.util_pct and power <= rule.idle_power_frac * limit
