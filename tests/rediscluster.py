"""A real Redis Cluster of three masters for tests: three ``redis-server --cluster-enabled yes``
on 127.0.0.1, joined by ``redis-cli --cluster create``, stopped after the test.

    from tests.rediscluster import RedisCluster, redis_cluster  # noqa: F401  (the fixture)

    def test_x(redis_cluster: RedisCluster) -> None:
        url = redis_cluster.url          # "redis://127.0.0.1:PORT/0": the first node
        redis_cluster.nodes              # the three RedisServer processes (tests/redisserver.py)

Each node is a ``tests.redisserver.RedisServer`` (AOF everysec, its own directory) with
``--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000``; its
cluster bus port is its port + 10000 (Redis's rule), so both must be free. The fixture
waits until every node says ``cluster_state:ok``. Without ``redis-server`` or ``redis-cli``
it skips, unless ``CI`` is set (then it fails, as ``redis_server`` does).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redisserver import RedisServer, redis_server_binary

__all__ = ["RedisCluster", "redis_cluster"]


def _redis_cli() -> str:
    path = shutil.which("redis-cli")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("redis-cli is not installed (CI must run the Redis Cluster tests)")
        pytest.skip("redis-cli is not installed (apt-get install redis-tools)")
    return path


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cluster_ports(n: int) -> list[int]:
    """``n`` free ports whose cluster bus ports (port + 10000) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port < 55000 and port not in ports and _free(port + 10000):
            ports.append(port)
    return ports


class RedisCluster:
    """Three redis-server masters on 127.0.0.1 holding the 16384 slots between them."""

    def __init__(self, directory: Path, masters: int = 3) -> None:
        redis_server_binary()
        self.cli = _redis_cli()
        self.directory = Path(directory)
        self.nodes = [
            RedisServer(
                self.directory / f"node{i}",
                port=port,
                extra=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ],
            )  # fmt: skip
            for i, port in enumerate(_cluster_ports(masters))
        ]

    @property
    def url(self) -> str:
        """The first node's URL: the crawler finds the others through it."""
        return self.nodes[0].url

    def cli_call(self, node: RedisServer, *args: str) -> str:
        """``redis-cli -p PORT ARGS`` on ``node``: its output (raw)."""
        done = subprocess.run(
            [self.cli, "-h", "127.0.0.1", "-p", str(node.port), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.stdout + done.stderr

    def start(self, timeout: float = 30.0) -> None:
        """Start the nodes, create the cluster, wait until every node says it is ok."""
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        created = subprocess.run(
            [self.cli, "--cluster", "create", *addresses, "--cluster-replicas", "0",
             "--cluster-yes"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if created.returncode != 0:
            self.stop()
            why = created.stdout + created.stderr
            raise RuntimeError(f"redis-cli --cluster create failed: {why}")
        deadline = time.monotonic() + timeout
        while not all(self.ok(n) for n in self.nodes):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the cluster did not reach cluster_state:ok")
            time.sleep(0.1)

    def ok(self, node: RedisServer) -> bool:
        """True if ``node`` says ``cluster_state:ok``."""
        return "cluster_state:ok" in self.cli_call(node, "CLUSTER", "INFO")

    def keys_per_node(self) -> list[int]:
        """``DBSIZE`` of each master."""
        return [int(self.cli_call(n, "DBSIZE").strip() or 0) for n in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A running three-master Redis Cluster for this test."""
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
