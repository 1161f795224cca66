"""A real redis-server for tests: started on a free 127.0.0.1 port, stopped after the test.

Used by the Redis state's tests and the cluster tests::

    from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

    def test_x(redis_server: RedisServer) -> None:
        url = redis_server.url          # "redis://127.0.0.1:PORT/0"
        redis_server.restart()          # stop (SIGTERM), start again: same port, same dir

The server runs with ``--save "" --appendonly yes --appendfsync everysec --dir TMP`` (AOF,
no RDB snapshots), so a ``restart()`` keeps what was written up to about a second before it
(``stop()`` is a clean SHUTDOWN: the AOF is flushed, nothing is lost). ``kill()`` is SIGKILL:
what the last second wrote may be gone, as after a crash.

Without ``redis-server`` on PATH the fixture skips, unless ``CI`` is set (then it fails: CI
must run these tests; ``.ci/run`` installs the server).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["RedisServer", "redis_server", "redis_server_binary"]


def redis_server_binary() -> str:
    """The redis-server path; skips the test (fails it under CI) when there is none."""
    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed (CI must run the Redis tests)")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process on 127.0.0.1 with its data in ``directory``.

    Args:
        directory: its ``--dir`` (the AOF lives there; kept across ``restart``).
        port: the port (0: a free one, chosen once and kept across restarts).
        extra: more ``redis-server`` arguments (e.g. ``["--maxmemory", "100mb"]``).
    """

    def __init__(self, directory: Path, port: int = 0, extra: list[str] | None = None) -> None:
        self.binary = redis_server_binary()
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or _free_port()
        self.extra = list(extra or [])
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.directory / "redis.log"

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING."""
        if self.proc is not None and self.proc.poll() is None:
            return
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--dir",
            str(self.directory),
            "--logfile",
            str(self.log),
            "--daemonize",
            "no",
            *self.extra,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            if self.ping():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited {self.proc.returncode}: {self._tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server did not answer in {timeout} s: {self._tail()}")
            time.sleep(0.02)

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def command(self, *args: str, timeout: float = 2.0) -> bytes:
        """Send one command (RESP) over a plain socket; the reply read up to a CRLF (a
        simple reply: +OK, :1, -ERR; enough for probes without a client library)."""
        parts = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a.encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(b"".join(parts))
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data

    def ping(self) -> bool:
        """True if the server answers PING now (NOAUTH counts: it runs, with a password)."""
        try:
            return self.command("PING", timeout=0.5).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """A clean stop (SIGTERM: redis-server flushes its AOF and exits)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL, as a crash: the AOF holds what was fsynced (everysec: up to ~1 s lost)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self.proc = None

    def restart(self, down: float = 0.0) -> None:
        """Stop cleanly, stay down ``down`` seconds, start again on the same port and dir."""
        self.stop()
        if down > 0:
            time.sleep(down)
        self.start()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A running redis-server for this test (skips when none is installed, fails under CI)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
