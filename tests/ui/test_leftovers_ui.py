"""A job's leftovers on the dashboard: its pane's leftovers section, the GPU held only by them marked in the
grid, the job kept by "problems only", and R planning a reap of exactly those processes."""

from __future__ import annotations

import re

import json

import pytest

from gpuwatch_tui.ui.app import GpuwatchApp
from gpuwatch_tui.ui.screens.confirm_action import ConfirmActionScreen
from gpuwatch_tui.ui.screens.job_screen import JobScreen
from gpuwatch_tui.ui.widgets.gpu_grid import GpuGrid
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable
from gpuwatch_tui.ui.widgets.leftovers_panel import LeftoversPanel

from .actions_fakes import ActingRecordedSource, service
from .conftest import FLEET

SIZE = (120, 40)
JOB = "trainer-e:28841"  # eval-sweep-3, on GPU 2 of trainer-e
WORKER = 28850
GIB = 2**30


@pytest.fixture
def fleet_with_leftovers(tmp_path):
    """The fleet, with eval-sweep-3 finished while one of its DataLoader workers holds 12 GiB on GPU 2."""
    data = json.loads(FLEET.read_text())
    job = next(j for j in data["jobs"] if j["id"] == JOB)
    job.update(phase="finished", detail=None, alive=False)
    job["leftovers"] = {"since": data["now"] - 95, "root_pid": 28841, "processes": [
        {"pid": WORKER, "start_ticks": 991, "name": "pt_data_worker", "cmdline": ["python3", "eval.py"],
         "user": "ml", "state": "S", "gpus": [2], "gpu_memory_bytes": 12 * GIB}]}
    host = next(h for h in data["hosts"] if h["name"] == "trainer-e")
    gpu = host["gpus"][2]
    gpu["processes"] = [{"pid": WORKER, "used_memory_mib": 12 * 1024}]
    # What a GPU held by an idle CUDA context reads (H200): 0% util, ~119 W, its memory used.
    gpu["samples"] = [[0.0, 12 * 1024 + 600.0, 34.0, 119.0, 1980] for _ in gpu["samples"]]
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(data))
    return path


class ReapingSource(ActingRecordedSource):
    def plan_action(self, job_id: str, name: str):
        if name != "reap":
            return super().plan_action(job_id, name)
        job = next(j for j in self.jobs() if j.id == job_id)
        if job.leftovers is None:
            raise service.ActionRefused(f"job {job.name} has no leftovers: nothing to reap")
        targets = tuple(service.PlanTarget(p.pid, p.start_ticks, p.user, "leftover", " ".join(p.cmdline))
                        for p in job.leftovers.processes)
        plan = service.ActionPlan(action="reap", title="Reap leftovers", host=job.host, job_id=job.id, job=job.name,
                                  targets=targets, command=f"SIGTERM {WORKER}", warnings=(), confirm=True,
                                  created_at=0.0)
        self.planned.append(plan)
        return plan


def grid_text(app) -> str:
    grid = app.screen.query_one(GpuGrid)
    return "\n".join(grid.render_line(y).text for y in range(grid.size.height))


async def test_the_pane_the_grid_the_problem_filter_and_the_reap_key(fleet_with_leftovers):
    source = ReapingSource(fleet_with_leftovers)
    app = GpuwatchApp(source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = grid_text(app)
        assert len(re.findall(r"leftovers [a-z2-9]{5} eval", grid)) == 1, grid  # GPU 2 of trainer-e, held only by the worker
        await pilot.press("ctrl+z")
        await pilot.pause()
        table = app.screen.query_one(JobsTable)
        kept = table.job_ids
        assert JOB in kept and "trainer-a:41200" not in kept  # finished, but it left a worker behind
        assert str(table.get_cell(JOB, "phase")) == "finished · 1 left"
        await pilot.press("ctrl+z")
        await pilot.press("end", "enter")
        await pilot.pause()
        assert isinstance(app.screen, JobScreen) and app.screen.job_id == JOB
        panel = app.screen.query_one(LeftoversPanel)
        assert panel.display
        text = str(panel.render())
        assert "leftovers: 1 process holds 12.0 GiB on GPU 2" in text, text
        assert "pid 28841 went 1m35s ago" in text and "R: reap leftovers" in text
        assert str(WORKER) in text and "pt_data_worker" in text
        await pilot.press("R")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmActionScreen)
        [plan] = source.planned
        assert plan.action == "reap" and [t.pid for t in plan.targets] == [WORKER]


async def test_a_job_without_leftovers_has_no_section_and_readonly_offers_no_key(fleet_with_leftovers):
    app = GpuwatchApp(ReapingSource(fleet_with_leftovers), readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")  # the first job: training, nothing left over
        await pilot.pause()
        assert not app.screen.query_one(LeftoversPanel).display
        await pilot.press("escape", "end", "enter")
        await pilot.pause()
        text = str(app.screen.query_one(LeftoversPanel).render())
        assert "leftovers: 1 process" in text and "R: reap" not in text
        await pilot.press("R")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmActionScreen)


def test_job_pane_with_leftovers_snapshot(snap_compare, fleet_with_leftovers):
    # end, enter: eval-sweep-3's pane, its leftovers section under the phase history
    assert snap_compare(GpuwatchApp(ReapingSource(fleet_with_leftovers)), terminal_size=SIZE, press=["end", "enter"])


def test_dashboard_with_leftovers_snapshot(snap_compare, fleet_with_leftovers):
    # the grid marks trainer-e's GPU 2 (held only by the worker), the table says "1 left"
    assert snap_compare(GpuwatchApp(ReapingSource(fleet_with_leftovers)), terminal_size=SIZE)
