"""The login node over SSH: argv words reach the remote command intact (quoted, never interpreted)."""

from __future__ import annotations

import asyncio

from gpuwatch_tui.config import HostConfig
from gpuwatch_tui.slurm.runner import SshRunner
from gpuwatch_tui.transport.ssh import SshConnector

from tests.core.helpers import make_config


def test_words_with_shell_syntax_arrive_as_they_are(sshd_factory, ssh_env, tmp_path):
    (login,) = sshd_factory(1)
    cfg = make_config(ssh_env, [{"name": login.name, "ssh": login.name}])
    marker = tmp_path / "pwned"
    words = ["a b", "$(touch " + str(marker) + ")", "`id`", "x;y", "'q'", '"d"', "*", "|", "%j %%"]

    async def go():
        connector = SshConnector(cfg.settings)
        runner = SshRunner(HostConfig(name="login", ssh=login.name, host=login.name), connector)
        try:
            ok = await runner.run(["printf", "%s\\n", *words], timeout=20)
            missing = await runner.run(["squeue-not-installed-here"], timeout=20)
            latin1 = await runner.run(["printf", "caf\\351 ok"], timeout=20)  # a job name that is not UTF-8
            return ok, missing, latin1
        finally:
            await runner.close()
            await connector.close()

    ok, missing, latin1 = asyncio.run(go())
    assert ok.ok, ok.failure()
    assert ok.stdout.splitlines() == words
    assert not marker.exists()
    assert not missing.ok and missing.returncode == 127 and "exit status 127" in missing.failure()
    assert latin1.ok and latin1.stdout == "caf\ufffd ok"
