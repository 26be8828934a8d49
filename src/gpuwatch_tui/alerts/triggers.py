"""What an alert rule can be "on": job phases entered, a host leaving `connected`, a spinning GPU.

Apart from events.py so that reading a config (which checks rule triggers) does not import the log
and frame model that events need: the dashboard's first frame comes before any of those."""

JOB_TRIGGERS = ("crashed", "stalled", "silent", "finished")
HOST_DOWN = "host-down"
GPU_SPIN = "gpu-spin"
TRIGGERS = (*JOB_TRIGGERS, HOST_DOWN, GPU_SPIN)
# Not rules' triggers: the dashboard's rolling recording stopped (a full disk) or resumed; sent to every sink.
RECORDING_STOPPED = "recording-stopped"
RECORDING_RESUMED = "recording-resumed"
SEVERITY = {"crashed": "critical", "stalled": "warning", "silent": "warning", "finished": "info",
            HOST_DOWN: "warning", GPU_SPIN: "warning",
            RECORDING_STOPPED: "critical", RECORDING_RESUMED: "info"}
