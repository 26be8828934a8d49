"""A GPU's display-only readings (temperature, SM clock) are read every DISPLAY_READ_EVERY_S and repeated in
between; every other reading (utilisation, memory, power) is taken each sample. Replays the recorded H200 samples through the NVML stand-in of
test_nvml_process_list, with the temperature calls counted."""

from __future__ import annotations


from .test_nvml_process_list import recorded


def test_temperature_and_clock_are_read_every_few_seconds_and_the_rest_every_sample(monkeypatch, probe_loaded):
    gpu_nvml = probe_loaded.module("gpu_nvml")
    nvml, phases = recorded()
    calls = {"temp": 0, "power": 0, "clock": 0}
    temp, power, clock_info = nvml.nvmlDeviceGetTemperature, nvml.nvmlDeviceGetPowerUsage, nvml.nvmlDeviceGetClockInfo

    def count(name, fn):
        def counted(*args):
            calls[name] += 1
            return fn(*args)
        return counted

    nvml.nvmlDeviceGetTemperature = count("temp", temp)
    nvml.nvmlDeviceGetPowerUsage = count("power", power)
    nvml.nvmlDeviceGetClockInfo = count("clock", clock_info)
    clock = [1000.0]
    monkeypatch.setattr(gpu_nvml.time, "monotonic", lambda: clock[0])
    source = gpu_nvml.NvmlSource(nvml)
    source.direct = None  # the recorded stand-in is read through its functions
    rows = phases["idle"] + phases["held"] + phases["training"]
    gpus = len(nvml.now)
    last_read = None
    for n, i in enumerate(rows):
        nvml.play(i)
        sample = source.sample()
        if n % int(gpu_nvml.DISPLAY_READ_EVERY_S) == 0:  # one second apart: read on every fifth sample, the first too
            last_read = [(g["temp_c"], g["sm_clock_mhz"]) for g in nvml.now]
        assert [(g["temp_c"], g["sm_clock_mhz"]) for g in sample] == last_read
        assert [g["power_w"] for g in sample] == [g["power_w"] for g in nvml.now]
        clock[0] += 1.0
    samples = len(rows)
    assert calls["power"] == samples * gpus
    assert calls["temp"] == calls["clock"] == -(-samples // int(gpu_nvml.DISPLAY_READ_EVERY_S)) * gpus


def test_gpu_facts_the_client_has_are_left_out_unbuilt_and_fill_back_to_the_full_entries(monkeypatch, probe_loaded):
    gpu_nvml = probe_loaded.module("gpu_nvml")
    """With fact deltas, a GPU's facts (uuid, name, totals, limit, processes) are built only when the client
    lacks them; filled back from the last values sent, every sample equals what a full frame carries."""
    nvml_lean, phases = recorded()
    nvml_full, _ = recorded()
    clock = [1000.0]
    monkeypatch.setattr(gpu_nvml.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(gpu_nvml.time, "time", lambda: clock[0])
    lean, full = gpu_nvml.NvmlSource(nvml_lean), gpu_nvml.NvmlSource(nvml_full)
    lean.direct = full.direct = None
    deltas = probe_loaded.module("frame_deltas").FrameDeltas()
    client: dict[int, dict] = {}
    left_out = 0
    for i in phases["idle"] + phases["held"] + phases["training"]:
        nvml_lean.play(i)
        nvml_full.play(i)
        deltas.begin(clock[0])
        frame = {"gpus": lean.sample(deltas.known_gpu), "procs": [], "tails": []}
        deltas.apply(frame, clock[0], procs_done=True)
        expected = full.sample()
        assert lean.pids == {p["pid"] for g in expected for p in g["processes"]}
        for got, want in zip(frame["gpus"], expected):
            left_out += "uuid" not in got
            filled = client.setdefault(got["index"], {})
            filled.update(got)
            assert filled == want
        clock[0] += 1.0
    assert left_out > len(phases["training"])  # most samples leave them out


def test_a_gpus_facts_follow_a_new_power_limit_and_memory_total(monkeypatch, probe_loaded):
    gpu_nvml = probe_loaded.module("gpu_nvml")
    """A GPU's facts are made again only when what they are made of moved: a new power limit (read every 30 s)
    and a new memory total each show in the next entry built, with the same process list kept."""
    nvml, phases = recorded()
    wall, mono = [1000.0], [1000.0]
    monkeypatch.setattr(gpu_nvml.time, "monotonic", lambda: mono[0])
    monkeypatch.setattr(gpu_nvml.time, "time", lambda: wall[0])
    source = gpu_nvml.NvmlSource(nvml)
    source.direct = None
    nvml.play(phases["training"][0])
    first = source.sample()[0]
    for gpu in nvml.now:
        gpu["power_limit_w"] = 500.0
    wall[0] += 31.0  # past the limits' refresh (the process list, kept 30 s on the monotonic clock, stays)
    mono[0] += 1.0
    second = source.sample()[0]
    assert first["power_limit_w"] != 500.0 and second["power_limit_w"] == 500.0
    for gpu in nvml.now:
        gpu["mem_total_mib"] -= 1024.0
    wall[0] += 31.0  # the total as v2 reports it is measured again with the limits
    mono[0] += 1.0
    third = source.sample()[0]
    assert third["mem_total_mib"] == first["mem_total_mib"] - 1024.0 and third["power_limit_w"] == 500.0
