"""Parts of a job's view kept between builds stay equal to building them afresh."""

from __future__ import annotations

from gpuwatch_tui.jobs.rules import RuleSet, builtin_rules


def test_progress_history_view_follows_the_history_as_it_grows_and_wraps():
    from gpuwatch_tui.jobs.export import PROGRESS_POINTS, current_view, progress_history_view
    from gpuwatch_tui.jobs.interpret import LogInterpreter
    from gpuwatch_tui.jobs.job_state import JobState
    from gpuwatch_tui.jobs.progress import ProgressTracker

    job = JobState("j", "h", "n", 1, interp=LogInterpreter(RuleSet(builtin_rules()), ProgressTracker(max_history=150)))
    assert progress_history_view(job) == ()
    for step in range(1, 400):
        job.interp.progress.update({"step": str(step), "loss": str(1.0 / step)}, float(step))
        job.revision += 1  # as the tracker does on each frame of the job's host: its view may have changed
        if step % 7 in (0, 3):
            continue  # views are not built after every line
        want = [(p.time, p.step, p.loss) for p in list(job.interp.progress.history)[-PROGRESS_POINTS:]]
        assert [(v.time, v.step, v.loss) for v in progress_history_view(job)] == want
        # The job's view keeps the points it made and adds the new ones (one, or several between views).
        kept = current_view(job, float(step)).progress_history
        assert [(v.time, v.step, v.loss) for v in kept] == want
        assert kept == progress_history_view(job)


def test_progress_view_is_progress_to_json():
    """A job view's progress is Progress.to_json's numbers (one rounding rule), NaN loss in words."""
    import math

    from gpuwatch_tui.jobs.export import progress_view
    from gpuwatch_tui.jobs.progress import Progress
    from gpuwatch_tui.views import ProgressView

    cases = [Progress(), Progress(step=12.0, total=100.0, rate=2.4199999, unit="it/s", loss=0.1234567891,
                                  epoch=1.0, epochs=3.0, eta_s=36.5, lr=3e-4, desc="Epoch 1", updated_at=5.5),
             Progress(step=2.0**60, loss=math.nan), Progress(loss=math.inf, rate=-math.inf)]
    for p in cases:
        assert progress_view(p) == ProgressView(**p.to_json()), p
    assert progress_view(cases[2]).loss is None and progress_view(cases[2]).loss_text == "nan"
