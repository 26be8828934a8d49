def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: end to end through real sshd hosts, real scenario processes and "
                                       "`gpuwatch watch --json`")
