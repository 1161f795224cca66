"""The cluster scaling benchmark's instruments (benchmarks/cluster_scaling.py, issue 23).

* benchmarks/tcp_delay.py, the delaying proxy that stands for a network between the workers
  and Redis, against a real echo server: a request/reply exchange through it takes at least
  the round trip asked for (a lower bound only: load can make it slower, never faster), a
  pipelined stream arrives whole and in order, and an EOF goes through.
* ``-m slow``: the benchmark's ``--quick`` slice run for real (nginx on 4 loopback origins
  serving the PostgreSQL manual, real redis-server, workers in CPU-quota cgroups; root and
  cgroups needed), and the shape of its ``--json``: every run crawled the whole site, the
  figures a page are there, the proxy added its delay. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "benchmarks" / "tcp_delay.py"
BENCH = ROOT / "benchmarks" / "cluster_scaling.py"


def _echo_server() -> tuple[socket.socket, threading.Thread]:
    """A threaded echo server on 127.0.0.1: echoes until EOF, then closes."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return

            def echo(c: socket.socket) -> None:
                with c:
                    while data := c.recv(65536):
                        c.sendall(data)

            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return srv, t


def _proxy(target_port: int, rtt_ms: float) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, str(PROXY), "--listen", "127.0.0.1:0", "--to"]
        + [f"127.0.0.1:{target_port}", "--rtt-ms", str(rtt_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("listening 127.0.0.1:"), line
    return proc, int(line.rsplit(":", 1)[1])


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, f"EOF after {len(buf)} of {n} bytes"
        buf += chunk
    return buf


def test_tcp_delay_adds_the_round_trip_keeps_order_and_passes_eof() -> None:
    srv, _ = _echo_server()
    proc, port = _proxy(srv.getsockname()[1], rtt_ms=40)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            trips = []
            for i in range(5):
                msg = f"ping {i}\n".encode()
                t = time.perf_counter()
                c.sendall(msg)
                assert _recv_exactly(c, len(msg)) == msg
                trips.append(time.perf_counter() - t)
            # each exchange crossed the proxy twice, 20 ms each way
            assert min(trips) >= 0.040, trips
            # pipelined: 2,000 numbered messages sent at once come back whole and in order,
            # in about one round trip (delayed, not throttled: not 2,000 round trips)
            stream = b"".join(b"%06d," % i for i in range(2000))
            t = time.perf_counter()
            c.sendall(stream)
            assert _recv_exactly(c, len(stream)) == stream
            assert time.perf_counter() - t >= 0.040
            # EOF: our half-close reaches the echo server, which closes: we read EOF
            c.shutdown(socket.SHUT_WR)
            assert c.recv(10) == b""
    finally:
        proc.terminate()
        proc.wait(5)
        assert proc.stdout is not None
        proc.stdout.close()
        srv.close()


def test_tcp_delay_refuses_a_negative_rtt() -> None:
    res = subprocess.run(
        [sys.executable, str(PROXY), "--listen", "127.0.0.1:0", "--to", "127.0.0.1:1"]
        + ["--rtt-ms", "-1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2
    assert "--rtt-ms: must be >= 0" in res.stderr


def _can_run_quick() -> str | None:
    if os.geteuid() != 0:
        return "needs root (cgroups, renice)"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no cgroup filesystem"
    for tool in ("redis-server", "redis-cli"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"needs {tool}"
    return None


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_quick_slice_runs_and_reports_every_figure(tmp_path: Path) -> None:
    reason = _can_run_quick()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "quick.json"
    res = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=280,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads(out.read_text())
    runs = data["runs"]
    kinds = sorted((r["mode"], r["workers"], r["rtt_ms"]) for r in runs)
    assert kinds == [
        ("memory", 1, 0.0),
        ("redis", 1, 0.0),
        ("redis", 1, 1.0),
        ("redis", 2, 0.0),
        ("redis", 2, 1.0),
    ]
    # 4 origins of the 1,169-page manual: the memory crawl's pages are the site; every run
    # fetched all of them, each once, every worker of a cluster fetched some, and exited 0
    expected = data["expected_pages"]
    assert expected > 4 * 1100
    for r in runs:
        assert r["pages"] == expected, r
        assert r["gets"] == r["distinct"], r
        assert r["exits"] == [0] * r["workers"], r
        assert all(n > 0 for n in r["per_worker_gets"]), r
        assert 0 < r["window_gets"] <= r["gets"] and r["window_s"] > 0
        assert r["worker_cpu_window_s"] > 0 and r["worker_cpu_s"] >= r["worker_cpu_window_s"]
        if r["mode"] == "redis":
            assert r["redis_calls_window"] > 0 and r["redis_cpu_window_s"] > 0
        else:
            assert r["redis_calls"] == 0
        if r["rtt_ms"] == 1.0:
            assert r["added_ms"] >= 0.5, r  # the proxy really stood in the way
    table = res.stdout
    for col in ("pages/s", "eff", "wCPU ms/p", "R CPU ms/p", "R cmds/p", "issue 23's bars"):
        assert col in table
