"""`w`: who uses what over every host — per user the jobs, GPUs, GPU memory, idle time of held GPUs and
their energy over the history window; and the help's colour and phase legend."""

from __future__ import annotations

from gpuwatch_tui.model import GpuProcess, GpuSample, HostSample, ProcInfo
from gpuwatch_tui.store import Store
from gpuwatch_tui.ui.screens.help_screen import HelpScreen
from gpuwatch_tui.ui.screens.users_screen import UsersScreen
from gpuwatch_tui.ui.widgets.users_table import user_rows
from gpuwatch_tui.vocab import PHASES

from .conftest import FLEET
from .helpers import lines_of


def _proc(pid: int, user: str) -> ProcInfo:
    return ProcInfo(pid=pid, ppid=1, start_time=1000.0, name="python3", cmdline=("python3", "train.py"), cwd="/w",
                    state="R", cpu_s=1.0, cpu_children_s=0.0, rss_bytes=1 << 30, threads=4, sid=pid, pgid=pid,
                    children=(), stdout=None, stderr=None, unbuffered=False, unbuffered_reason="", is_python=True,
                    user=user)


def test_each_user_gets_their_gpus_memory_idle_time_and_energy():
    store = Store(["a", "b"], history=10)
    for t in range(5):  # one sample a second: alice busy on a/0, bob idle on a/1 and b/0
        for host in ("a", "b"):
            gpus = [GpuSample(0, "GPU-0", "H200", util_pct=99.0 if host == "a" else 0.0, mem_used_mib=1024.0,
                              mem_total_mib=143771.0, power_w=690.0 if host == "a" else 120.0,
                              processes=(GpuProcess(10 if host == "a" else 30, 1024.0),))]
            if host == "a":
                gpus.append(GpuSample(1, "GPU-1", "H200", util_pct=0.0, mem_used_mib=2048.0, mem_total_mib=143771.0,
                                      power_w=120.0, processes=(GpuProcess(20, 2048.0),)))
            procs = {10: _proc(10, "alice"), 20: _proc(20, "bob")} if host == "a" else {30: _proc(30, "bob")}
            store.apply_sample(host, HostSample(float(t), "nvml", gpus, procs))
    rows = {r.user: r for r in user_rows(store, [])}
    assert list(rows) == ["bob", "alice"]  # most GPUs first
    assert rows["bob"].gpus == {("a", 1), ("b", 0)} and rows["bob"].hosts == {"a", "b"}
    assert rows["bob"].mem_mib == 2048.0 + 1024.0
    assert rows["bob"].idle_s == 10.0 and rows["alice"].idle_s == 0.0  # 5 idle samples of 1 s on each of 2 GPUs
    assert abs(rows["alice"].energy_wh - 5 * 690.0 / 3600) < 1e-9


async def test_w_opens_who_uses_what_and_closes(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, UsersScreen)
        text = "\n".join(lines_of(app.screen.query_one("#users-table")))
        assert "ml" in text and "12" in text and "GiB" in text and "Wh" in text
        await pilot.press("w")
        assert not isinstance(app.screen, UsersScreen)


async def test_help_has_a_colour_and_phase_legend(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        legend = "\n".join(lines_of(app.screen.query_one("#help-legend")))
        assert all(phase in legend for phase in PHASES) and "GPU util < 5%" in legend


def test_users_screen_snapshot(snap_compare):
    from gpuwatch_tui.ui.app import GpuwatchApp
    from gpuwatch_tui.ui.recorded_source import RecordedSource

    assert snap_compare(GpuwatchApp(RecordedSource(FLEET), min_refresh_interval=0), terminal_size=(120, 40),
                        press=["w"])
