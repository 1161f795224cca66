"""A test's network fence: no connection leaves 127.0.0.0/8 and ::1, and names resolve to
what the test says.

``netguard`` patches the socket layer (``socket.socket.connect``/``connect_ex``, the selector
loop's ``sock_connect`` and ``create_connection``, so ``asyncio.open_connection`` too): an
attempt to connect anywhere else raises :class:`NetGuardViolation` (an OSError, so the crawler
handles it as a failed connect) BEFORE the call reaches the kernel: no packet is sent. Every
such attempt is also recorded, and the test fails at teardown if there was one (the crawler
turns exceptions into error kinds, so a raise alone could go unnoticed). Every attempt that
was let through is kept in ``attempts`` (host, port).

``fake_dns`` maps test names to addresses for both transports: the plain path's
``crawler.http.pool.resolve`` and aiohttp's default resolver. A name it does not know, but
``localhost``, does not resolve (no lookup leaves the machine).
"""

from __future__ import annotations

import asyncio
import asyncio.base_events
import asyncio.selector_events
import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import aiohttp.connector
import pytest
from aiohttp.abc import AbstractResolver

import crawler.http.pool

__all__ = ["FakeDns", "NetGuard", "NetGuardViolation", "fake_dns", "netguard"]


class NetGuardViolation(ConnectionRefusedError):
    """A test tried to connect outside 127.0.0.0/8 and ::1 (stopped before the connect)."""


def _allowed(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False  # a name at this layer: resolution is the caller's job, refuse it
    if ip.version == 4:
        return ip in ipaddress.IPv4Network("127.0.0.0/8")
    return ip == ipaddress.IPv6Address("::1")


class NetGuard:
    """What the patched socket layer saw."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []
        self.violations: list[tuple[str, int]] = []

    def check(self, address: Any) -> None:
        if not isinstance(address, tuple):  # AF_UNIX paths: local by nature
            return
        host, port = str(address[0]), int(address[1])
        if not _allowed(host):
            self.violations.append((host, port))
            raise NetGuardViolation(f"netguard: connection to {host}:{port} refused by the test")
        self.attempts.append((host, port))


@pytest.fixture
def netguard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetGuard]:
    guard = NetGuard()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sock_connect = asyncio.selector_events.BaseSelectorEventLoop.sock_connect
    real_create = asyncio.base_events.BaseEventLoop.create_connection

    def connect(self: socket.socket, address: Any) -> None:
        guard.check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        guard.check(address)
        return real_connect_ex(self, address)

    async def sock_connect(self: Any, sock: socket.socket, address: Any) -> None:
        guard.check(address)
        await real_sock_connect(self, sock, address)

    async def create_connection(
        self: Any, factory: Any, host: Any = None, port: Any = None, **kwargs: Any
    ) -> Any:
        if isinstance(host, str):
            try:
                ipaddress.ip_address(host.partition("%")[0])
            except ValueError:
                pass  # a name: its addresses are checked at sock.connect
            else:
                guard.check((host, port or 0))
        return await real_create(self, factory, host, port, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "sock_connect", sock_connect)
    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "create_connection", create_connection)
    yield guard
    assert not guard.violations, f"connections outside loopback were attempted: {guard.violations}"


class FakeDns:
    """Test names -> addresses; ``asked`` lists every name looked up."""

    def __init__(self) -> None:
        self.names: dict[str, list[str]] = {}
        self.asked: list[str] = []

    def lookup(self, host: str) -> list[str]:
        self.asked.append(host)
        host = host.lower().rstrip(".")
        if host in self.names:
            addresses = self.names[host]
            if len(addresses) > 1 and addresses[0] == "rotate":  # a new answer each time
                rotating = addresses[1:]
                answer = rotating[0]
                self.names[host] = ["rotate", *rotating[1:], answer]
                return [answer]
            return list(addresses)
        if host == "localhost":
            return ["127.0.0.1", "::1"]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    dns = FakeDns()

    async def plain_resolve(loop: Any, host: str, port: int) -> list[Any]:
        out = []
        for address in dns.lookup(host):
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            out.append((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port)))
        return out

    class Resolver(AbstractResolver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[Any]:
            out = []
            for address in dns.lookup(host):
                fam = socket.AF_INET6 if ":" in address else socket.AF_INET
                out.append(
                    {
                        "hostname": host,
                        "host": address,
                        "port": port,
                        "family": fam,
                        "proto": 0,
                        "flags": socket.AI_NUMERICHOST,
                    }
                )
            return out

        async def close(self) -> None:
            pass

    monkeypatch.setattr(crawler.http.pool, "resolve", plain_resolve)
    monkeypatch.setattr(aiohttp.connector, "DefaultResolver", Resolver)
    return dns
