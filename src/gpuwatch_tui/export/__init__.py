"""`gpuwatch export`: the headless core's hosts, GPUs and job verdicts as Prometheus metrics."""
