"""A real job crashes on a real sshd host: exactly one alert reaches the hook, and `watch --alerts`."""

from __future__ import annotations

import asyncio
import json
import sys

from gpuwatch_tui.alerts import AlertRunner, build_sinks
from gpuwatch_tui.config import load_config
from gpuwatch_tui.monitor import Monitor
from tests.core.helpers import toml_value, wait_for
from tests.e2e.harness import launch, write_config


async def test_scenario_crash_gives_exactly_one_alert(sshd_factory, ssh_env, tmp_path):
    [host] = sshd_factory(1)
    got = tmp_path / "alerts.jsonl"
    cfg_path = write_config(tmp_path / "gpuwatch.toml", ssh_env, [host])
    hook = [sys.executable, "-c", "import sys; open(sys.argv[1], 'a').write(sys.stdin.read())", str(got)]
    with cfg_path.open("a") as f:
        f.write(f"\n[alerts]\nsinks = [\"hook\"]\n[alerts.hook]\ncommand = {toml_value(hook)}\n"
                "[[alerts.rules]]\non = \"crashed\"\n[[alerts.rules]]\non = \"finished\"\n")
    config = load_config(str(cfg_path))
    host.set_scenario(gpus=1, phase="idle", uuid_prefix=f"GPU-{host.name}")
    monitor = Monitor(config)
    runner = AlertRunner(monitor, config.alerts, build_sinks(config.alerts), tick_s=0.25)
    await monitor.start()
    runner.start()
    run = None
    try:
        await wait_for(lambda: monitor.store.hosts[host.name].state == "connected", 20, what="connected")
        run = launch(ssh_env, host, tmp_path / "run", "crash_traceback.py", "--steps", "6", "--step-time", "0.4")
        host.set_scenario(gpus=1, phase="training", uuid_prefix=f"GPU-{host.name}",
                          processes=[{"gpu": 0, "pid": run.pid, "used_memory_mib": 40_000}])
        await wait_for(lambda: got.exists() and got.read_text().strip(), 60, what="the crash alert")
        await asyncio.sleep(3)  # more samples of the crashed job: no second alert
    finally:
        await runner.stop()
        await monitor.stop()
        if run is not None:
            run.stop()
    lines = [json.loads(x) for x in got.read_text().splitlines()]
    assert len(lines) == 1, lines
    assert lines[0]["trigger"] == "crashed" and lines[0]["host"] == host.name
    assert "crash_traceback" in lines[0]["job"] or "crash_traceback" in lines[0]["title"], lines[0]
    assert [e.trigger for e in runner.fired] == ["crashed"]
    assert all(d.ok for d in runner.dispatcher.deliveries)
