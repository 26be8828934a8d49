"""Watching only this machine must not pay for importing asyncssh (start-up time of `gpuwatch`)."""

import subprocess
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]  # `tests.support` importable in the child


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


def test_prometheus_only_monitor_never_imports_asyncssh():
    """Hosts read only from Prometheus need no SSH connector: none is made, asyncssh is not imported.
    (Nothing listens at the source's port: the host settles as unreachable, with the reason.)"""
    code = (
        "import asyncio, sys\n"
        "from gpuwatch_tui.config import parse_config\n"
        "from gpuwatch_tui.monitor import Monitor\n"
        "from tests.support.net import free_port\n"
        "url = f'http://127.0.0.1:{free_port(\"127.0.0.1\")}'\n"
        "source = {'kind': 'prometheus', 'name': 'dcgm', 'url': url, 'hosts': ['n1', 'n2'], 'backfill': 0}\n"
        "async def main():\n"
        "    m = Monitor(parse_config({'sources': [source]}, 't.toml'))\n"
        "    assert m.connector is None\n"
        "    await m.start(); await m.wait_settled(10); await m.stop()\n"
        "    assert m.store.hosts['n1'].state == 'unreachable', m.store.hosts['n1']\n"
        "asyncio.run(main())\n"
        "print('asyncssh' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=_REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_host_with_ssh_under_a_source_gets_the_connector():
    from gpuwatch_tui.config import parse_config
    from gpuwatch_tui.monitor import Monitor

    source = {"kind": "prometheus", "name": "dcgm", "url": "http://127.0.0.1:9", "backfill": 0}
    config = parse_config({"sources": [source], "hosts": [{"name": "n1", "ssh": "n1.example", "source": "dcgm"}]},
                          "t.toml")
    assert Monitor(config).connector is not None
