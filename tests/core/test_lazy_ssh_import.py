"""Watching only this machine must not pay for importing asyncssh (start-up time of `gpuwatch`)."""

import subprocess
import sys


def test_local_only_monitor_never_imports_asyncssh():
    code = (
        "import asyncio, sys\n"
        "from gpuwatch_tui.config import local_only_config\n"
        "from gpuwatch_tui.monitor import Monitor\n"
        "async def main():\n"
        "    m = Monitor(local_only_config())\n"
        "    await m.start(); await m.wait_settled(10); await m.stop()\n"
        "    assert m.store.hosts[next(iter(m.store.hosts))].last_sample_time\n"
        "asyncio.run(main())\n"
        "print('asyncssh' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
