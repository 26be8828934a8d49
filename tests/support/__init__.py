"""Test support for gpuwatch: real sshd hosts on loopback, a controllable TCP relay,
and a fake `nvidia-smi` replaying recordings from a real H200.

Import as ``from tests.support.sshd import SshdHost`` etc. (tests/conftest.py puts
the repository root on sys.path).  Modules:

  sshd               SshdHost, ClientKeys, SshEnv, write_known_hosts, write_ssh_config
  relay              TcpRelay
  fake_nvidia_smi    the fake (run as a script) + install_fake_nvidia_smi()
  fake_smi_scenario  write_scenario / update_scenario / ScenarioFile
  procs              pid-pinned process helpers (ProcRef, terminate, ...)
  net                loopback addresses and free ports
"""
