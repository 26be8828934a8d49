"""Loopback addresses and free TCP ports for tests.

All test traffic stays on 127.0.0.0/8.  Ports are drawn at random from
20000-32767, below Linux's default ephemeral range (32768-60999), so an
outgoing connection never grabs a port that a stopped test server is about to
bind again (restart keeps its port).
"""

from __future__ import annotations

import ipaddress
import random
import socket
import threading
import time

PORT_LOW = 20000
PORT_HIGH = 32767

_lock = threading.Lock()
_handed_out: set[int] = set()
_rng = random.SystemRandom()


def loopback_address(n: int) -> str:
    """The address 127.0.0.<n> (2 <= n <= 254); 127.0.0.1 is left to clients and relays."""
    if not 1 <= n <= 254:
        raise ValueError(f"loopback host number out of range: {n}")
    return f"127.0.0.{n}"


def check_loopback(address: str) -> str:
    """Raise ValueError unless *address* is an IPv4 address in 127.0.0.0/8."""
    if ipaddress.ip_address(address) not in ipaddress.ip_network("127.0.0.0/8"):
        raise ValueError(f"test traffic must stay on 127.0.0.0/8, got {address!r}")
    return address


def port_is_free(address: str, port: int) -> bool:
    """True if *port* can be bound on *address* right now (strict: no SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port that is free on *address* and was never handed out before in this process."""
    check_loopback(address)
    with _lock:
        for _ in range(500):
            port = _rng.randint(PORT_LOW, PORT_HIGH)
            if port in _handed_out:
                continue
            if port_is_free(address, port) and port_is_free("127.0.0.1", port):
                _handed_out.add(port)
                return port
    raise RuntimeError(f"no free TCP port found on {address}")


def wait_for_port(address: str, port: int, timeout: float = 10.0) -> None:
    """Wait until a TCP connect to (address, port) succeeds."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1.0):
                return
        except OSError as exc:
            last = exc
            time.sleep(0.02)
    raise TimeoutError(f"{address}:{port} did not accept connections within {timeout}s: {last}")
