"""gpuwatch: watch GPU hosts over SSH and tell what each training job is doing."""

__version__ = "0.1.0"
