"""`x` Dismiss: an ended job leaves the table and the job pane; a live one stays, with a reason."""

from __future__ import annotations

from textual.command import CommandPalette

from gpuwatch_tui.jobs.tracker import JobTracker
from gpuwatch_tui.model import ExitInfo, GpuProcess, GpuSample, HostSample, ProcessRef, ProcInfo
from gpuwatch_tui.ui.levels import job_has_ended
from gpuwatch_tui.ui.monitor_source import MonitorSource
from gpuwatch_tui.ui.screens.dashboard import DashboardScreen
from gpuwatch_tui.ui.screens.help_screen import binding_rows
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable
from gpuwatch_tui.views import JobView

from .helpers import notifications

SIZE = (120, 40)
CRASHED = "trainer-e:28841"  # last row
TRAINING = "trainer-a:41200"  # first row
STILL_RUNNING = "x: job is still running; dismiss is for ended jobs"


def table(app) -> JobsTable:
    return app.screen.query_one(JobsTable)


async def test_x_dismisses_an_ended_job_from_the_table(app, source):
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("end")
        assert table(app).selected_job_id == CRASHED
        await pilot.press("x")
        await pilot.pause()
        assert CRASHED not in table(app).job_ids
        assert CRASHED not in [j.id for j in source.jobs()]
        assert table(app).row_count == 4
        assert table(app).selected_job_id == "trainer-e:51877"  # the cursor stays on the last row
        assert notifications(app)[-1] == "dismissed eval-sweep-3 on trainer-e"


async def test_x_on_a_live_job_says_so_and_keeps_it(app, source):
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        assert table(app).selected_job_id == TRAINING
        await pilot.press("x")
        await pilot.pause()
        assert notifications(app)[-1] == STILL_RUNNING
        assert TRAINING in table(app).job_ids and len(source.jobs()) == 5


async def test_a_job_whose_processes_are_gone_can_be_dismissed(app, source):
    async with app.run_test(size=SIZE) as pilot:
        source.set_job(TRAINING, alive=False)  # phase not updated yet, but nothing is alive
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        assert TRAINING not in table(app).job_ids


async def test_x_in_the_job_pane_dismisses_and_closes_it(app, source):
    async with app.run_test(size=SIZE) as pilot:
        app.open_job(CRASHED)
        await pilot.pause()
        assert isinstance(app.screen, JobScreen)
        await pilot.press("x")
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert CRASHED not in table(app).job_ids


async def test_x_in_the_job_pane_of_a_live_job_stays(app, source):
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        app.open_job(TRAINING)
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job_id == TRAINING
        assert notifications(app)[-1] == STILL_RUNNING


async def test_dismiss_from_the_command_palette(app, source):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("end")
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"dismiss ended")  # the registry title: "Dismiss ended job"
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert CRASHED not in table(app).job_ids


async def test_dismiss_is_in_help_and_the_footer(app):
    async with app.run_test(size=(80, 24)) as pilot:
        assert ("jobs table", "x", "Dismiss") in binding_rows(app)
        assert ("job pane", "x", "Dismiss") in binding_rows(app)
        keys = [(key, active.binding.description) for key, active in app.active_bindings.items()
                if active.binding.show]
        assert ("x", "Dismiss") in keys
        await pilot.pause()


def test_job_has_ended():
    assert job_has_ended(JobView("h:1", "a", "h", phase="crashed"))
    assert job_has_ended(JobView("h:1", "a", "h", phase="finished", alive=False))
    assert job_has_ended(JobView("h:1", "a", "h", phase="training", alive=False))
    assert not job_has_ended(JobView("h:1", "a", "h", phase="training"))
    assert not job_has_ended(JobView("h:1", "a", "h", phase="stalled", alive=True))


def _python_on_gpu(pid: int) -> tuple[ProcInfo, GpuSample]:
    proc = ProcInfo(pid=pid, ppid=1, start_time=1000.0, name="python3", cmdline=("python3", "train.py"),
                    cwd="/tmp", state="S", cpu_s=5.0, cpu_children_s=0.0, rss_bytes=1 << 30, threads=4, sid=pid,
                    pgid=pid, children=(), stdout=None, stderr=None, unbuffered=False, unbuffered_reason="",
                    is_python=True, start_ticks=123456)
    gpu = GpuSample(0, "GPU-0", "NVIDIA H200", 99.0, 80_000.0, 143_771.0, 50.0, 690.0, 700.0, 1980.0,
                    processes=(GpuProcess(pid, 80_000.0),))
    return proc, gpu


class _Monitor:
    """What MonitorSource reads of a Monitor: its store, its (real) tracker, subscriptions."""

    def __init__(self, tracker: JobTracker) -> None:
        self.store = None
        self.tracker = tracker
        self.callbacks = []

    def subscribe(self, callback):
        self.callbacks.append(callback)


def test_monitor_source_dismiss_calls_the_tracker_and_redraws():
    tracker = JobTracker()
    proc, gpu = _python_on_gpu(4242)
    tracker.update("h", HostSample(1.0, "nvml", [gpu], {4242: proc}), now=1.0)
    idle = GpuSample(0, "GPU-0", "NVIDIA H200", 0.0, 0.0, 143_771.0, 40.0, 78.0, 700.0, 345.0, processes=())
    gone = [ExitInfo(4242, 1000.0, 2.0, exit_code=1)]
    tracker.update("h", HostSample(2.0, "nvml", [idle], {}, gone=gone), now=2.0)
    source = MonitorSource(_Monitor(tracker))
    calls = []
    source.subscribe(lambda: calls.append(1))
    [job] = source.jobs()  # now cached
    assert isinstance(job, JobView) and not job.alive and job_has_ended(job)
    assert job.processes == (ProcessRef("h", 4242, 123456),) and job.root == ProcessRef("h", 4242, 123456)
    assert source.dismiss_job(job.id) is True
    assert tracker.views() == []
    assert source.jobs() == []  # the cache did not keep it
    assert calls  # subscribers told
    assert source.dismiss_job(job.id) is False


def _footer_keys(app) -> list[str]:
    return [key for key, active in app.active_bindings.items() if active.binding.show]


async def test_job_pane_footer_offers_x_only_for_an_ended_job(app, source):
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_job(TRAINING)
        await pilot.pause()
        assert "x" not in _footer_keys(app)
        source.set_job(TRAINING, phase="finished", alive=False)
        await pilot.pause()
        await pilot.pause()
        assert "x" in _footer_keys(app)


async def test_x_works_with_the_gpu_grid_focused(app, source):
    from gpuwatch_tui.ui.widgets.gpu_grid import GpuGrid

    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("shift+tab")
        assert isinstance(app.focused, GpuGrid)
        await pilot.press("down", "x")  # trainer-a's GPU 0: a live job
        assert notifications(app)[-1] == STILL_RUNNING
