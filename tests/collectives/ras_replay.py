"""A RAS service on loopback that answers with a report captured from NCCL 2.28.9 on a real GPU
(tests/data/nccl_capture): the protocol as NCCL speaks it, the report byte for byte. `silent` accepts and
never answers, as a SIGSTOPped process's service did there."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "nccl_capture"


def captured(name: str) -> str:
    """A captured exchange without the capture script's markers: what the server sent after its greeting
    (and after the format's OK, for a JSON one)."""
    text = (CAPTURE / name).read_text()
    text = text.split("\n", 1)[1] if text.startswith(">>> hello") else text
    text = text.replace("\n>>> EOF\n", "")
    return text[3:] if text.startswith("OK\n") else text


class RasReplay:
    def __init__(self, text_report: str, json_report: str | None = None, silent: bool = False) -> None:
        self.text, self.json, self.silent = text_report, json_report, silent
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.asked: list[str] = []
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if not self.silent:
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        fmt = "text"
        with conn, conn.makefile("rb") as lines:
            for raw in lines:
                line = raw.decode().strip()
                self.asked.append(line)
                if line.startswith("CLIENT PROTOCOL"):
                    conn.sendall(b"SERVER PROTOCOL 2\n")
                elif line == "SET FORMAT json":
                    if self.json is None:
                        conn.sendall(b"ERROR: Unknown command\n")
                    else:
                        fmt = "json"
                        conn.sendall(b"OK\n")
                elif line == "VERBOSE STATUS":
                    conn.sendall((self.json if fmt == "json" else self.text).encode())
                    return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()
