"""The probe's nvidia-smi fallback, end to end on a real sshd host with the fake nvidia-smi."""

from __future__ import annotations


from gpuwatch_tui.monitor import Monitor
from tests.support.fake_smi_scenario import DRIVER_FAILURE

from .helpers import host_entry, host_rec, make_config, probes_on, wait_for


async def test_driver_failure_and_no_devices_are_clean_states(sshd_factory, ssh_env):
    a, b = sshd_factory(2)
    a.set_scenario(fail=True)
    b.set_scenario(gpus=0)
    monitor = Monitor(make_config(ssh_env, [host_entry(a), host_entry(b, gpu_source="auto")]))
    await monitor.start()
    try:
        await wait_for(lambda: all(host_rec(monitor, h.name).last_sample_time for h in (a, b)), 15, what="samples")
        ra, rb = host_rec(monitor, a.name), host_rec(monitor, b.name)
        # no GPU is a clean state of a connected host, with the reason
        assert (ra.state, ra.gpu_source, ra.gpus) == ("connected", "none", {})
        assert "couldn't communicate with the NVIDIA driver" in ra.gpu_error and DRIVER_FAILURE[:40] in ra.gpu_error
        assert (rb.state, rb.gpu_source, rb.gpus) == ("connected", "none", {})
        assert "nvidia-smi: no devices" in rb.gpu_error and "NVML" in rb.gpu_error
    finally:
        await monitor.stop()


async def test_nvidia_smi_dying_is_reported_not_frozen(sshd_factory, ssh_env):
    """When nvidia-smi dies under the probe, the host must not go on showing its last numbers as live."""
    (a,) = sshd_factory(1)
    a.set_scenario(gpus=2, phase="training", uuid_prefix="GPU-d", exit_after_ticks=5, exit_code=9,
                   exit_message="Unable to determine the device handle for GPU0000:19:00.0: Unknown Error")
    monitor = Monitor(make_config(ssh_env, [host_entry(a)]))
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, a.name).gpus, 10, what="first GPUs")
        await wait_for(lambda: host_rec(monitor, a.name).gpu_error, 10, what="gpu_error after nvidia-smi died")
        r = host_rec(monitor, a.name)
        assert "nvidia-smi" in r.gpu_error
        assert r.gpus == {}
        assert r.state == "connected"  # the host itself is fine
        # After a driver reset nvidia-smi works again: the probe restarts it (5 s backoff),
        # without a reconnect.
        a.update_scenario(exit_after_ticks=None, exit_code=None, exit_message=None)
        await wait_for(lambda: host_rec(monitor, a.name).gpus and not host_rec(monitor, a.name).gpu_error, 15,
                       what="GPUs back after nvidia-smi was restarted")
        assert host_rec(monitor, a.name).reconnects == 0
    finally:
        await monitor.stop()


async def test_nvidia_smi_hanging_is_reported_then_recovers(sshd_factory, ssh_env):
    (a,) = sshd_factory(1)
    a.set_scenario(gpus=1, phase="idle", uuid_prefix="GPU-h")
    monitor = Monitor(make_config(ssh_env, [host_entry(a)]))
    await monitor.start()
    try:
        await wait_for(lambda: host_rec(monitor, a.name).gpus, 10, what="first GPUs")
        a.update_scenario(hang=True)
        await wait_for(lambda: host_rec(monitor, a.name).gpu_error, 10, what="gpu_error while nvidia-smi hangs")
        assert "nvidia-smi" in host_rec(monitor, a.name).gpu_error
        assert host_rec(monitor, a.name).gpus == {}
        a.update_scenario(hang=None)
        await wait_for(lambda: host_rec(monitor, a.name).gpus and not host_rec(monitor, a.name).gpu_error, 10,
                       what="GPUs back")
    finally:
        await monitor.stop()
    await wait_for(lambda: not probes_on(a), 5, what="no probe left")
