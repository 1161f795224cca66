"""Issue 27, item 2: a page cannot turn the crawler or the checker on the network it runs in.

Addresses are refused on the resolved address at connect time (``--exclude-private``,
``--exclude-link-local``, ``--exclude-loopback``, ``-E``; link-local refused by default in
``crawler check``), the seeds' host:port always allowed; ``--include``/``--exclude`` apply to
every redirect hop of a probe; an answer that is not HTTP is ``protocol`` without its bytes.

No test here sends a packet outside 127.0.0.0/8 and ::1: test names resolve through
``fake_dns`` to link-local or private addresses, and ``netguard`` stops (and fails the test
on) any connect elsewhere before it reaches the kernel.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

import crawler.http.pool
import crawler.http.prepare
from crawler.check.api import check
from crawler.config import CrawlConfig
from crawler.core.engine import crawl
from crawler.http.client import Fetcher
from crawler.http.guard import AddressGuard, address_class
from tests.netguard import FakeDns, NetGuard, NetGuardViolation, fake_dns, netguard

__all__ = ["fake_dns", "netguard"]  # the fixtures, used by name

ROOT = Path(__file__).resolve().parent.parent


def _page(*hrefs: str) -> str:
    return "<html><body>" + "".join(f'<a href="{h}">x</a>\n' for h in hrefs) + "</body></html>"


def _site(html: str, routes: dict[str, Callable[[web.Request], web.StreamResponse]] | None = None):
    async def index(request: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    for path, handler in (routes or {}).items():
        app.router.add_route("*", path, handler)
    return app


class Listener:
    """A raw TCP server that counts the connections it accepts (and answers nothing)."""

    def __init__(self) -> None:
        self.accepted = 0
        self.servers: list[asyncio.base_events.Server] = []
        self.port = 0

    async def start(self, hosts: tuple[str, ...] = ("127.0.0.1", "::1")) -> int:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            writer.close()

        for host in hosts:
            try:
                server = await asyncio.start_server(handle, host, self.port)
            except OSError:
                continue  # no ::1 here
            self.servers.append(server)
            self.port = server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        for server in self.servers:
            server.close()
            await server.wait_closed()


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    lis = Listener()
    yield lis
    await lis.close()


# -- the guard of the tests itself --


def test_netguard_stops_a_connection_to_a_private_address(netguard: NetGuard) -> None:
    with pytest.raises(NetGuardViolation):
        socket.create_connection(("10.0.0.1", 80), timeout=1)
    with socket.socket() as sock, pytest.raises(NetGuardViolation):
        sock.connect_ex(("169.254.169.254", 80))

    async def aio() -> None:
        with pytest.raises(NetGuardViolation):
            await asyncio.open_connection("10.0.0.1", 80)

    asyncio.run(aio())
    assert ("10.0.0.1", 80) in netguard.violations
    netguard.violations.clear()  # expected here: the teardown would fail the test otherwise


# -- the classes --


@pytest.mark.parametrize(
    ("address", "cls"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("0.0.0.0", "loopback"),
        ("::1", "loopback"),
        ("::", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:7f00:1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.100.100.200", "private"),  # CGNAT space (a cloud's metadata lives there too)
        ("fd00:ec2::254", "private"),
        ("::ffff:10.1.2.3", "private"),
        ("172.32.0.1", None),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
        ("not-an-address", None),
    ],
)
def test_address_class(address: str, cls: str | None) -> None:
    assert address_class(address) == cls


def test_the_seeds_host_and_port_are_allowed_whatever_they_resolve_to() -> None:
    cfg = CrawlConfig(seeds=("http://Site.Test:8080/",), exclude_loopback=True)
    guard = AddressGuard.from_config(cfg)
    assert guard is not None
    assert guard.refused("site.test", 8080, "127.0.0.1") is None
    assert guard.refused("site.test", 8081, "127.0.0.1") == "loopback"  # another port
    assert guard.refused("other.test", 8080, "127.0.0.1") == "loopback"
    assert AddressGuard.from_config(CrawlConfig(seeds=("http://a.test/",))) is None


# -- the checker: link-local by default, private with the flag, names resolved --


async def test_check_refuses_link_local_by_default_on_the_resolved_address(
    netguard: NetGuard, fake_dns: FakeDns, serve
) -> None:
    fake_dns.names["metadata.test"] = ["169.254.169.254"]
    fake_dns.names["meta6.test"] = ["fe80::a9fe:a9fe"]
    html = _page(
        "http://metadata.test/latest/meta-data/iam/",
        "http://meta6.test:8080/",
        "http://169.254.169.254/latest/",
        "http://[::ffff:169.254.169.254]/x",
    )
    server = await serve(_site(html))
    seed = f"http://127.0.0.1:{server.port}/"
    report = await check(seed, timeout=5, retries=0)
    assert not report.broken, report.broken
    blocked = {p.url: p for p in report.warnings if p.error == "blocked_address"}
    assert set(blocked) == {
        "http://metadata.test/latest/meta-data/iam/",
        "http://meta6.test:8080/",
        "http://169.254.169.254/latest/",
        "http://[::ffff:a9fe:a9fe]/x",
    }
    detail = blocked["http://metadata.test/latest/meta-data/iam/"].detail
    assert "169.254.169.254" in detail and "link-local" in detail, detail
    assert {"metadata.test", "meta6.test"} <= set(fake_dns.asked)  # the names were resolved
    assert report.stats.pages == 1  # the seed, on loopback, was crawled
    assert report.stats.urls == 1  # the refused ones were not checked


async def test_check_allow_link_local_and_exclude_private(
    netguard: NetGuard, fake_dns: FakeDns, serve
) -> None:
    fake_dns.names["intranet.test"] = ["10.0.0.1"]
    fake_dns.names["mixed.test"] = ["10.0.0.2", "127.0.0.1"]  # one allowed address remains
    fake_dns.names["metadata.test"] = ["169.254.169.254"]

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    html = _page(
        "http://intranet.test:8080/admin",
        "http://100.100.100.200/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://192.168.0.1/",
    )
    server = await serve(_site(html, {"/ok": ok}))
    seed = f"http://127.0.0.1:{server.port}/"
    html2 = _page(f"http://mixed.test:{server.port}/ok")
    server2 = await serve(_site(html2))
    report = await check(
        (seed, f"http://127.0.0.1:{server2.port}/"), exclude_private=True, timeout=5, retries=0
    )
    blocked = sorted(p.url for p in report.warnings if p.error == "blocked_address")
    assert blocked == sorted(
        [
            "http://intranet.test:8080/admin",
            "http://100.100.100.200/latest/meta-data/",
            "http://[fd00:ec2::254]/",
            "http://192.168.0.1/",
        ]
    )
    assert not report.broken, report.broken  # mixed.test went to its loopback address
    assert ("10.0.0.2", server.port) not in netguard.attempts

    # --allow-link-local: the connection is let through to the socket (where the test's
    # guard stops it before any packet)
    server3 = await serve(_site(_page("http://metadata.test/latest/")))
    report = await check(
        f"http://127.0.0.1:{server3.port}/", allow_link_local=True, timeout=2, retries=0
    )
    assert ("169.254.169.254", 80) in netguard.violations
    netguard.violations.clear()
    assert not [p for p in report.warnings if p.error == "blocked_address"]


# -- every name form of loopback, against a real local server that must see nothing --

FORMS = [
    "http://0.0.0.0:{t}/a",
    "http://0x7f000001:{t}/b",
    "http://127.1:{t}/c",
    "http://0177.0.0.1:{t}/d",
    "http://2130706433:{t}/e",
    "http://①②⑦.0.0.1:{t}/f",
    "http://[::1]:{t}/g",
    "http://[::ffff:127.0.0.1]:{t}/h",
    "http://localhost:{t}/i",
    "http://LOCALHOST.:{t}/j",
]


async def test_every_name_form_of_loopback_is_refused(
    netguard: NetGuard, fake_dns: FakeDns, serve, listener: Listener
) -> None:
    target = await listener.start()
    html = _page(*(f.format(t=target) for f in FORMS), "/self")

    async def self_page(request: web.Request) -> web.Response:
        return web.Response(text="<p>me</p>", content_type="text/html")

    server = await serve(_site(html, {"/self": self_page}))
    seed = f"http://127.0.0.1:{server.port}/"
    report = await check(seed, exclude_loopback=True, timeout=5, retries=0)
    blocked = [p for p in report.warnings if p.error == "blocked_address"]
    assert len(blocked) == len(FORMS), [(p.url, p.error) for p in report.warnings]
    assert all("loopback" in p.detail for p in blocked), [p.detail for p in blocked]
    assert not report.broken, report.broken
    assert listener.accepted == 0
    assert not [a for a in netguard.attempts if a[1] == target]
    assert report.stats.pages == 2  # the seed and /self: the seed's origin is allowed


# -- the crawl, both transports: links, redirects and robots.txt; the resolved address --


@pytest.mark.parametrize("transport", ["plain", "aiohttp"])
async def test_crawl_refuses_excluded_addresses_of_in_scope_names(
    netguard: NetGuard,
    fake_dns: FakeDns,
    serve,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    if transport == "aiohttp":
        monkeypatch.setattr(crawler.http.prepare, "NO_PLAIN_HTTP", True)

    async def index(request: web.Request) -> web.Response:
        port = request.url.port
        html = _page(f"http://intra.site.test:{port}/", f"http://lo.site.test:{port}/", "/hop")
        return web.Response(text=html, content_type="text/html")

    async def hop(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://meta.site.test:{request.url.port}/latest/")

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/hop", hop)
    server = await serve(app)
    port = server.port
    for name, address in (
        ("site.test", "127.0.0.1"),
        ("intra.site.test", "10.0.0.1"),
        ("meta.site.test", "169.254.169.254"),
        ("lo.site.test", "127.0.0.1"),
    ):
        fake_dns.names[name] = [address]
    result = await crawl(
        f"http://site.test:{port}/",
        scope="subdomains",
        exclude_private=True,
        exclude_link_local=True,
        exclude_loopback=True,
        retries=2,
        backoff=0.01,
        timeout=5,
        keep_results=True,
    )
    pages = {p.url: p for p in result.pages}
    seed = pages[f"http://site.test:{port}/"]
    assert seed.status == 200 and seed.error is None  # the seed's name: allowed
    for url, cls in (
        (f"http://intra.site.test:{port}/", "private"),
        (f"http://lo.site.test:{port}/", "loopback"),  # the seed's address, not its name
    ):
        assert pages[url].error == "blocked_address", (url, pages[url])
        assert cls in (pages[url].error_detail or ""), pages[url].error_detail
        assert pages[url].retries == 0  # never retried
    hop_page = pages[f"http://site.test:{port}/hop"]
    assert hop_page.error == "blocked_address", hop_page  # a redirect hop
    assert "link-local" in (hop_page.error_detail or "")
    assert {"intra.site.test", "meta.site.test", "lo.site.test"} <= set(fake_dns.asked)


async def test_a_robots_txt_redirect_to_an_excluded_address_is_not_followed(
    netguard: NetGuard, fake_dns: FakeDns, serve
) -> None:
    async def robots(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://intra.test:{request.url.port}/robots.txt")

    server = await serve(_site(_page("/a"), {"/robots.txt": robots}))
    fake_dns.names["intra.test"] = ["10.0.0.1"]
    result = await crawl(
        f"http://127.0.0.1:{server.port}/", exclude_private=True, timeout=5, keep_results=True
    )
    assert "intra.test" in fake_dns.asked
    # an unreachable robots.txt (its redirect target refused): disallow all, as RFC 9309 says
    assert result.stats.robots_disallowed == 1 and result.stats.pages == 0


async def test_dns_rebinding_is_caught_at_connect_time(
    netguard: NetGuard, fake_dns: FakeDns, serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="ok", headers={"Connection": "close"})

    server = await serve(_site("", {"/p": page}))
    monkeypatch.setattr(crawler.http.pool, "DNS_TTL", 0.0)  # every connect resolves again
    fake_dns.names["rebind.test"] = ["rotate", "127.0.0.1", "10.0.0.1"]
    cfg = CrawlConfig(seeds=("http://other.test/",), exclude_private=True, retries=0)
    fetcher = Fetcher(cfg)
    try:
        first = await fetcher.fetch(f"http://rebind.test:{server.port}/p")
        second = await fetcher.fetch(f"http://rebind.test:{server.port}/p")
    finally:
        await fetcher.close()
    assert first.status == 200, Fetcher.describe(first)
    assert second.error == "blocked_address", Fetcher.describe(second)
    assert "10.0.0.1" in (second.error_detail or "")


# -- --exclude/--include on every redirect hop of a probe --


async def test_exclude_applies_to_every_redirect_hop_of_a_probe(serve) -> None:
    seen: list[str] = []

    async def go(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        raise web.HTTPFound("/internal/secret?token=abc")

    async def secret(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        return web.Response(text="secret")

    ext = web.Application()
    ext.router.add_route("*", "/go", go)
    ext.router.add_route("*", "/internal/secret", secret)
    external = TestServer(ext, host="127.0.0.2", port=0)
    await external.start_server()
    try:
        server = await serve(_site(_page(f"http://127.0.0.2:{external.port}/go")))
        report = await check(
            f"http://127.0.0.1:{server.port}/", exclude=("/internal/",), timeout=5, retries=0
        )
    finally:
        await external.close()
    assert seen and all(s == "/go" for s in seen), seen
    [warning] = [p for p in report.warnings if p.url.endswith("/go")]
    assert warning.error == "excluded", warning
    assert not report.broken


# -- an answer that is not HTTP: kind protocol, its bytes never shown --


async def _banner_server() -> tuple[asyncio.base_events.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n")
        await writer.drain()
        try:
            await asyncio.wait_for(reader.read(1), 2)
        except (TimeoutError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("plain", [True, False])
async def test_a_non_http_answer_is_protocol_without_its_bytes(plain: bool) -> None:
    server, port = await _banner_server()
    try:
        fetcher = Fetcher(CrawlConfig(retries=0, timeout=5), plain=plain)
        try:
            res = await fetcher.fetch(f"http://127.0.0.1:{port}/")
        finally:
            await fetcher.close()
    finally:
        server.close()
    assert res.error == "protocol", Fetcher.describe(res)
    assert "SSH" not in (res.error_detail or "") and "OpenSSH" not in (res.error_detail or "")
    assert "not HTTP" in (res.error_detail or "")


async def test_check_reports_a_non_http_port_as_protocol_without_the_banner(serve) -> None:
    banner, port = await _banner_server()
    try:
        server = await serve(_site(_page(f"http://127.0.0.1:{port}/")))
        report = await check(f"http://127.0.0.1:{server.port}/", timeout=5, retries=0)
    finally:
        banner.close()
    [broken] = report.broken
    assert broken.error == "protocol", broken
    assert "SSH" not in json.dumps(report.to_dict())


# -- the command line --


def test_cli_flags(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "crawler", "check", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    for flag in ("--exclude-private", "--exclude-link-local", "--exclude-loopback", "-E"):
        assert flag in out
    assert "--allow-link-local" in out
    crawl_help = subprocess.run(
        [sys.executable, "-m", "crawler", "crawl", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "--exclude-all-private" in crawl_help


def test_cli_check_dash_e_refuses_loopback_links(tmp_path: Path) -> None:
    """A real ``crawler check -E`` process: the linked loopback port sees no connection."""
    script = r"""
import asyncio, subprocess, sys, json
from aiohttp import web
async def main():
    hits = []
    async def handle(r, w):
        hits.append(1); w.close()
    target = await asyncio.start_server(handle, "127.0.0.1", 0)
    t = target.sockets[0].getsockname()[1]
    async def index(request):
        return web.Response(text=f'<a href="http://127.1:{t}/x">x</a>', content_type="text/html")
    app = web.Application(); app.router.add_get("/", index)
    runner = web.AppRunner(app); await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0); await site.start()
    port = site._server.sockets[0].getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", "check", f"http://127.0.0.1:{port}/", "-E",
        "--format", "json", "-q", stdout=subprocess.PIPE)
    out, _ = await proc.communicate()
    print(json.dumps({"rc": proc.returncode, "hits": len(hits), "report": json.loads(out)}))
    await runner.cleanup()
asyncio.run(main())
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["rc"] == 0 and data["hits"] == 0, data
    [warning] = data["report"]["warnings"]
    assert warning["error"] == "blocked_address" and "loopback" in warning["detail"], warning


# -- through a proxy: the proxy connects; the URL's host as written is checked --


async def test_through_a_proxy_only_the_literal_host_is_checked(
    netguard: NetGuard, fake_dns: FakeDns, listener: Listener
) -> None:
    proxy_port = await listener.start(("127.0.0.1",))
    cfg = CrawlConfig(
        seeds=("http://seed.test/",),
        proxy=f"http://127.0.0.1:{proxy_port}",
        exclude_loopback=True,
        exclude_private=True,
        retries=0,
        timeout=5,
    )
    fetcher = Fetcher(cfg)
    try:
        literal = await fetcher.fetch("http://10.0.0.1/")
        named = await fetcher.fetch("http://localhost:9/")
        assert listener.accepted == 0  # neither reached the proxy
        other = await fetcher.fetch("http://public.test/")  # the proxy (loopback) is allowed
    finally:
        await fetcher.close()
    assert literal.error == "blocked_address" and "private" in (literal.error_detail or "")
    assert named.error == "blocked_address" and "loopback" in (named.error_detail or "")
    assert other.error != "blocked_address" and listener.accepted == 1, Fetcher.describe(other)
    assert "public.test" not in fake_dns.asked  # the proxy resolves it, not us
