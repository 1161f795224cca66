"""A real Redis Cluster of three masters for tests: three ``redis-server --cluster-enabled yes``
on 127.0.0.1, joined by ``redis-cli --cluster create``, stopped after the test
(``RedisCluster(dir, replicas=1)``: a replica a master too, for failovers).

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

__all__ = ["RedisCluster", "redis_cluster", "started_cluster"]


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
        taken = {q for p in ports for q in (p, p + 10000, p - 10000)}  # nodes and buses
        if port < 55000 and port not in taken and _free(port + 10000):
            ports.append(port)
    return ports


class RedisCluster:
    """Three redis-server masters on 127.0.0.1 holding the 16384 slots between them (and
    ``replicas`` replicas of each)."""

    def __init__(self, directory: Path, masters: int = 3, replicas: int = 0) -> None:
        self.replicas = replicas
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
                    # a replica takes over however long ago it last heard from its master
                    # (the default refuses when that is over ~30 s of idle replication)
                    "--cluster-replica-validity-factor",
                    "0",
                    "--repl-diskless-sync-delay",
                    "0",  # a replica's first sync at once, not 5 s after it asks
                ],
            )  # fmt: skip
            for i, port in enumerate(_cluster_ports(masters * (1 + replicas)))
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
        """Start the nodes, create the cluster, wait until every node says it is ok (and every
        replica has made its first sync)."""
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        created = subprocess.run(
            [self.cli, "--cluster", "create", *addresses, "--cluster-replicas",
             str(self.replicas), "--cluster-yes"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if created.returncode != 0:
            self.stop()
            why = created.stdout + created.stderr
            raise RuntimeError(f"redis-cli --cluster create failed: {why}")
        deadline = time.monotonic() + timeout
        while not all(self.ok(n) and self.synced(n) for n in self.nodes):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the cluster did not reach cluster_state:ok")
            time.sleep(0.1)

    def synced(self, node: RedisServer) -> bool:
        """A master, or a replica whose link to its master is up (its first sync done)."""
        info = self.cli_call(node, "--raw", "INFO", "replication")
        return "role:master" in info or "master_link_status:up" in info

    def ok(self, node: RedisServer) -> bool:
        """True if ``node`` says ``cluster_state:ok``."""
        return "cluster_state:ok" in self.cli_call(node, "CLUSTER", "INFO")

    def role(self, node: RedisServer) -> str:
        """``master`` or ``slave``, as ``ROLE`` says (empty if the node does not answer)."""
        lines = self.cli_call(node, "--raw", "ROLE").splitlines()
        return lines[0].strip() if lines else ""

    def masters(self) -> list[RedisServer]:
        """The nodes that are masters now."""
        return [n for n in self.nodes if n.ping() and self.role(n) == "master"]

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


def started_cluster(factory: pytest.TempPathFactory, replicas: int = 0) -> RedisCluster:
    """A started cluster; made again (new ports) if another process took a port it chose
    between the choice and the start (other test runs share the machine)."""
    for attempt in range(3):
        cluster = RedisCluster(factory.mktemp("cluster"), replicas=replicas)
        try:
            cluster.start()
        except RuntimeError as e:
            cluster.stop()
            if "Address already in use" not in str(e) or attempt == 2:
                raise
            continue
        return cluster
    raise AssertionError("unreachable")


@pytest.fixture
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A running three-master Redis Cluster for this test."""
    cluster = started_cluster(tmp_path_factory)
    try:
        yield cluster
    finally:
        cluster.stop()
