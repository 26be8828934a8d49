"""How the dashboard looks, fed from the recorded fleet (clock frozen in the recording)."""

from __future__ import annotations

import pytest

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.recorded_source import RecordedSource

from .conftest import FLEET

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((200, 50), id="200x50")]
FILL_SIZES = [pytest.param(size, id=f"{size[0]}x{size[1]}") for size in ((80, 24), (120, 40), (200, 50), (300, 80))]
THEMES = ["gpuwatch-dark", "gpuwatch-light"]


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare, size, theme):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET), theme=theme), terminal_size=size)


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES)
def test_job_pane(snap_compare, size, theme):
    async def open_stalled_job(pilot):
        pilot.app.open_job("trainer-b:30100")
        await pilot.pause()

    app = GpuwatchApp(RecordedSource(FLEET), theme=theme)
    assert snap_compare(app, terminal_size=size, run_before=open_stalled_job)


def test_high_contrast_main_screen(snap_compare):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET), theme="gpuwatch-high-contrast"),
                        terminal_size=(120, 32))


def test_help_screen(snap_compare):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET)), terminal_size=(100, 50), press=["question_mark"])


def test_job_pane_long_commands_80x24(snap_compare):
    """torchrun's long command lines are cut with "…", no horizontal scrollbar."""
    async def open_training_job(pilot):
        pilot.app.open_job("trainer-a:41200")
        await pilot.pause()

    assert snap_compare(GpuwatchApp(RecordedSource(FLEET)), terminal_size=(80, 24), run_before=open_training_job)


def _legend_fleet(path):
    """The recorded fleet with one job in every phase and trainer-a's GPUs at every level of
    utilisation, memory and temperature: to check by eye that each one reads differently."""
    import json

    from gpuwatch_tui.ui.levels import PHASES

    data = json.loads(FLEET.read_text(encoding="utf-8"))
    host = next(h for h in data["hosts"] if h["name"] == "trainer-a")
    levels = [(0, 2000, 35), (30, 40000, 50), (70, 90000, 75), (98, 138000, 88),
              (3, 70000, 60), (45, 130000, 72), (60, 20000, 84), (90, 100000, 40)]
    for gpu, (util, mem, temp) in zip(host["gpus"], levels):
        gpu["samples"] = [[util, mem, temp, 120 + 6 * util, 1980]] * len(gpu["samples"])
    template = data["jobs"][0]
    jobs = []
    for n, phase in enumerate(PHASES):
        job = json.loads(json.dumps(template))
        job.update(id=f"legend:{n}", name=f"job-{phase}", phase=phase, detail=None,
                   gpus=[n] if n < 8 else [], host="trainer-a" if n < 8 else "trainer-e")
        jobs.append(job)
    data["jobs"] = jobs
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("theme", ["gpuwatch-dark", "gpuwatch-light", "gpuwatch-high-contrast"])
def test_every_phase_and_level(snap_compare, tmp_path, theme):
    source = RecordedSource(_legend_fleet(tmp_path / "legend.json"))
    assert snap_compare(GpuwatchApp(source, theme=theme), terminal_size=(120, 40))


@pytest.mark.parametrize("size", FILL_SIZES)
def test_main_screen_fills_the_terminal(snap_compare, size):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET)), terminal_size=size)


def test_gpu_process_view(snap_compare):
    assert snap_compare(GpuwatchApp(RecordedSource(FLEET)), terminal_size=(160, 40), press=["g"])


def test_no_jobs_gives_the_room_to_the_history_view(snap_compare, tmp_path):
    import json

    data = json.loads(FLEET.read_text(encoding="utf-8"))
    data["jobs"] = []
    path = tmp_path / "no-jobs.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert snap_compare(GpuwatchApp(RecordedSource(path)), terminal_size=(120, 40), press=["down"])


def _shared_fleet(path):
    """The recorded fleet with trainer-e's compiling job moved onto GPU 1 beside the busy buffered one: a GPU two
    jobs share, each process with its own SM share (the compile's 0 %, the trainer's 96 %)."""
    import json

    data = json.loads(FLEET.read_text(encoding="utf-8"))
    host = next(h for h in data["hosts"] if h["name"] == "trainer-e")
    gpu0, gpu1 = host["gpus"][0], host["gpus"][1]
    moved = gpu0["processes"][0]
    gpu0["processes"] = []
    gpu1["processes"] = [dict(p, sm_pct=96.0) for p in gpu1["processes"]] + [dict(moved, sm_pct=0.0)]
    for job in data["jobs"]:
        if job["id"] == "trainer-e:52001":
            job["gpus"] = [1]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_shared_gpu_in_the_grid(snap_compare, tmp_path):
    source = RecordedSource(_shared_fleet(tmp_path / "shared.json"))
    assert snap_compare(GpuwatchApp(source), terminal_size=(160, 40))


def test_a_shared_gpu_in_the_process_view(snap_compare, tmp_path):
    source = RecordedSource(_shared_fleet(tmp_path / "shared.json"))
    assert snap_compare(GpuwatchApp(source), terminal_size=(160, 40), press=["g"])
