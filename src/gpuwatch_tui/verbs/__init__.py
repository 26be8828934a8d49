"""The headless verbs `gpuwatch` runs (action verbs, scancel, record/replay/report, export, doctor, the
Slurm queue view), one module each, beside the CLI that parses their arguments. No Textual here except
where a verb opens the dashboard (replay, the rolling recorder's source)."""
