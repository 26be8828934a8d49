"""Slurm: the queue read on a login node (squeue/scontrol/sacct), jobs' nodes as watched hosts, scancel.

Every command is an argv list run through a CommandRunner (runner.py): locally without a shell, or over
SSH with each word quoted. Parsers are pure functions over the commands' text (or JSON) output.
"""
