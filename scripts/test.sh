#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian/Ubuntu machine, then run it all.
#   OpenSSH server (the tests start real sshd instances on 127.0.0.x), tmux (one smoke test in a
#   real terminal), gcc (torch.compile on CPU), prometheus (a real server for the export/source tests), slurmctld/slurmd/munge/slurm-client
#   (a real one-machine Slurm for the Slurm tests), a venv with gpuwatch[test] and torch (CPU).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
command -v tmux >/dev/null || need+=(tmux)
command -v gcc >/dev/null || need+=(gcc)
command -v prometheus >/dev/null || need+=(prometheus)  # the Prometheus tests start their own server
# The Slurm tests start their own munged + slurmctld + slurmd (as root) and use the client commands.
[ -x /usr/sbin/slurmctld ] || need+=(slurmctld)
[ -x /usr/sbin/slurmd ] || need+=(slurmd)
[ -x /usr/sbin/munged ] || need+=(munge)
command -v squeue >/dev/null || need+=(slurm-client)
if [ ${#need[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

VENV=${GPUWATCH_TEST_VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[test]'
# torch (CPU) lets the scenario tests really torch.compile; they are skipped without it.
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q "torch==2.13.0" || echo "torch not installed: compile scenarios will be skipped"
fi
# Everything above is installed: a test that finds a real service missing fails instead of skipping.
export GPUWATCH_REQUIRE_SERVICES=1
exec "$VENV/bin/python" -m pytest -q "$@"
