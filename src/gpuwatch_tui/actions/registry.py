"""Every named action gpuwatch offers, in one list that the key bindings, the help screen, the
command palette, the advice under a verdict and the CLI all read (so they cannot drift apart).

The phase engine names actions (`Verdict.actions`); the dashboard shows their keys, `gpuwatch status`
their CLI verbs. No Textual here: the UI turns these specs into bindings itself.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

SCOPES = ("job", "app")


@dataclass(frozen=True)
class ActionSpec:
    name: str  # what the engine and the code call it
    key: str  # the key as a person types it: "k", "?", "/"
    title: str  # short: footer, help, palette
    description: str  # one line: what it does, shown next to the title in the palette
    confirm: bool  # asks before acting
    readonly_safe: bool  # changes nothing on any host: stays in --readonly
    cli_verb: str | None  # `gpuwatch VERB HOST JOB`; None: dashboard only
    scope: str  # "job": acts on the selected job; "app": on the dashboard itself
    confirm_label: str = ""  # the confirm dialog's button (a confirmed action)
    running: str = ""  # shown on the job while the action runs ("killing…")

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"action {self.name!r}: scope must be one of {', '.join(SCOPES)}, not {self.scope!r}")


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("quit", "q", "Quit", "leave gpuwatch (jobs on the hosts keep running)",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("help", "?", "Help", "every key, where it works",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("pause", "p", "Pause", "freeze the screen; sampling continues",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("theme", "t", "Theme", "cycle gpuwatch themes",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("kill", "K", "Kill", "stop the selected job's processes (SIGTERM, then SIGKILL); a Slurm job is cancelled "
               "with scancel",
               confirm=True, readonly_safe=False, cli_verb="kill", scope="job", confirm_label="Kill",
               running="killing…"),
    ActionSpec("restart_unbuffered", "u", "Restart with -u",
               "start the selected job again with unbuffered output, so its log shows what it prints",
               confirm=True, readonly_safe=False, cli_verb="restart", scope="job", confirm_label="Restart",
               running="restarting…"),
    # Confirmed: py-spy ptrace-stops the process for the moment it reads the stacks.
    ActionSpec("dump_stack", "d", "py-spy dump", "the Python stacks of every process of the selected job",
               confirm=True, readonly_safe=False, cli_verb="dump", scope="job", confirm_label="Dump",
               running="dumping…"),
    # Only the processes the engine follows as the job's leftovers, each pinned by pid and start time.
    ActionSpec("reap", "R", "Reap leftovers", "end the processes the selected job left running after its main "
               "process or launcher went (SIGTERM, then SIGKILL)",
               confirm=True, readonly_safe=False, cli_verb="reap", scope="job", confirm_label="Reap",
               running="reaping…"),
    # Reads what gpuwatch already holds and writes a local file: read-only mode keeps it. Its CLI is
    # `gpuwatch report HOST JOB`, a verb of its own (cli_verb is for verbs run by the action service).
    ActionSpec("report", "e", "Incident report", "write a Markdown incident report of the selected job and show its path",
               confirm=False, readonly_safe=True, cli_verb=None, scope="job"),
    # As `report`, with the recording of the last ten minutes and every dump: `gpuwatch report --bundle`.
    ActionSpec("bundle", "E", "Incident bundle", "write an incident bundle (report, recording window, dumps and "
               "findings, secrets redacted) of the selected job and show its path",
               confirm=False, readonly_safe=True, cli_verb=None, scope="job"),
    # Local to this dashboard: nothing happens on the host, so read-only mode keeps it.
    ActionSpec("dismiss", "x", "Dismiss ended job", "drop an ended job and its final verdict from the list",
               confirm=False, readonly_safe=True, cli_verb=None, scope="job"),
)

_BY_NAME = {a.name: a for a in ACTIONS}
_BY_KEY = {a.key: a for a in ACTIONS}


def by_name(name: str) -> ActionSpec:
    """The action called `name`; KeyError naming the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no action named {name!r} (known: {', '.join(_BY_NAME)})") from None


def by_key(key: str) -> ActionSpec | None:
    return _BY_KEY.get(key)


def allowed(readonly: bool) -> tuple[ActionSpec, ...]:
    """The actions offered: in read-only mode only those that change nothing on a host."""
    return tuple(a for a in ACTIONS if a.readonly_safe or not readonly)


def cli_verbs() -> dict[str, ActionSpec]:
    """verb -> action, for the CLI to build its subcommands (`gpuwatch kill HOST JOB`, ...)."""
    return {a.cli_verb: a for a in ACTIONS if a.cli_verb is not None}


def running_words(name: str) -> str:
    """What a job shows while action `name` runs on it ("killing…"); the name itself where it has none."""
    spec = _BY_NAME.get(name)
    return spec.running if spec is not None and spec.running else name


def key_hint(name: str) -> str:
    """How the dashboard offers an action the engine advises: "u: restart with -u"."""
    spec = by_name(name)
    return f"{spec.key}: {spec.title[:1].lower()}{spec.title[1:]}"


def cli_hint(name: str, host: str, job: str) -> str | None:
    """How `gpuwatch status` offers it: a command to paste, its arguments quoted for a shell
    (host and job names come from config and remote cmdlines). None: no CLI verb."""
    verb = by_name(name).cli_verb
    if verb is None:
        return None
    return " ".join(["gpuwatch", verb, shlex.quote(host), shlex.quote(job)])



# Replay keys (`gpuwatch replay FILE`, `gpuwatch demo`): only the replay dashboard binds them, the
# help screen lists them there. They move the replay's clock; nothing happens on any host.
REPLAY_ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("replay_play", "space", "Play/pause replay", "start or stop the replay's clock",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_faster", "+", "Faster", "replay speed up a step (1x 2x 5x 10x 30x 60x)",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_slower", "-", "Slower", "replay speed down a step",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_forward", "]", "+1 min", "jump one minute later in the recording",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_back", "[", "-1 min", "jump one minute earlier in the recording",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_forward_far", "}", "+10 min", "jump ten minutes later in the recording",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_back_far", "{", "-10 min", "jump ten minutes earlier in the recording",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_next_change", ">", "Next phase change", "jump to the next time a job changed phase",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
    ActionSpec("replay_previous_change", "<", "Previous phase change",
               "jump to the previous time a job changed phase",
               confirm=False, readonly_safe=True, cli_verb=None, scope="app"),
)
_BY_NAME.update({a.name: a for a in REPLAY_ACTIONS})
