"""The `/` filter matches what the screen shows of a job: its short id, the tag that tells same-named jobs
apart (a log folder, typed as a path: `/buffered`), its phase as the table writes it."""

from __future__ import annotations

from gpuwatch_tui.ui.screens.dashboard import job_matches
from gpuwatch_tui.ui.widgets.jobs_table import JobsTable, distinguishing_parts
from gpuwatch_tui.views import JobView

SIZE = (120, 40)


def shown(app) -> list[str]:
    return app.screen.query_one(JobsTable).job_ids


async def test_the_filter_finds_a_job_by_its_id_its_log_folder_and_its_phase_as_shown(app, source):
    sft = next(j for j in source.jobs() if j.name == "sft-nohup")
    async with app.run_test(size=SIZE) as pilot:
        for typed in (sft.short_id, "/sft", "silent (buffered", sft.short_id.upper()):
            await pilot.press("slash", *typed)
            await pilot.pause()
            assert shown(app) == [sft.id], typed
            await pilot.press("escape")
            await pilot.pause()
            assert len(shown(app)) == 5


def test_same_named_jobs_are_told_apart_by_the_tag_the_table_shows():
    jobs = [JobView(id=f"n1:{pid}:1", name="train.py", host="n1", pids=(pid,), short_id=sid,
                    log=f"/home/ml/{folder}/train.log", phase="silent", detail=detail)
            for pid, sid, folder, detail in ((11, "abcde", "buffered", "buffered-stdout"),
                                             (12, "fghij", "unbuffered", None))]
    parts = distinguishing_parts(jobs)
    assert parts == {"n1:11:1": "buffered", "n1:12:1": "unbuffered"}
    found = [j.short_id for j in jobs if job_matches(j, "/buffered", parts.get(j.id))]
    assert found == ["abcde"]
    assert [j.short_id for j in jobs if job_matches(j, "fghij", parts.get(j.id))] == ["fghij"]
    assert [j.short_id for j in jobs if job_matches(j, "unbuffered", parts.get(j.id))] == ["fghij"]
