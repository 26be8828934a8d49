"""Parts of a job's view kept between builds stay equal to building them afresh."""

from __future__ import annotations

from gpuwatch_tui.jobs.rules import RuleSet, builtin_rules


def test_progress_history_view_follows_the_history_as_it_grows_and_wraps():
    from gpuwatch_tui.jobs.export import PROGRESS_POINTS, progress_history_view
    from gpuwatch_tui.jobs.interpret import LogInterpreter
    from gpuwatch_tui.jobs.job_state import JobState
    from gpuwatch_tui.jobs.progress import ProgressTracker

    job = JobState("j", "h", "n", 1, interp=LogInterpreter(RuleSet(builtin_rules()), ProgressTracker(max_history=150)))
    assert progress_history_view(job) == ()
    for step in range(1, 400):
        job.interp.progress.update({"step": str(step), "loss": str(1.0 / step)}, float(step))
        if step % 7 in (0, 3):
            continue  # views are not built after every line
        want = [(p.time, p.step, p.loss) for p in list(job.interp.progress.history)[-PROGRESS_POINTS:]]
        assert [(v.time, v.step, v.loss) for v in progress_history_view(job)] == want
