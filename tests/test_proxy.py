"""Proxies: through it and only through it; the environment, NO_PROXY, a dead proxy."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from crawler import crawl
from crawler.config import CrawlConfig
from crawler.http.client import Fetcher
from crawler.http.errors import OptionError
from crawler.http.proxy import ProxyChooser, proxy_problem
from tests.proxyserver import VIA, ForwardProxy, TunnelProxy

PROXY_ENV = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*PROXY_ENV, "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)


class ViaSite:
    """A small site (/ -> /a -> /b, gzip-free) that logs each request's path and Via."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str | None]] = []

    def app(self) -> web.Application:
        async def any_path(request: web.Request) -> web.Response:
            self.log.append((request.path, request.headers.get("Via")))
            if request.path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n")
            nxt = {"/": "/a", "/a": "/b", "/b": "/r"}.get(request.path)
            if request.path == "/r":
                raise web.HTTPFound("/c")
            body = f"<a href='{nxt}'>n</a>" if nxt else "end"
            return web.Response(text=body, content_type="text/html")

        app = web.Application()
        app.router.add_get("/{tail:.*}", any_path)
        return app


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _start(serve, credentials: str | None = None):  # type: ignore[no-untyped-def]
    site = ViaSite()
    site_server = await serve(site.app())
    proxy = ForwardProxy(credentials=credentials)
    proxy_server = await serve(proxy.app())
    return site, str(site_server.make_url("/")), proxy, f"127.0.0.1:{proxy_server.port}"


async def test_the_crawl_goes_through_the_proxy_and_only_through_it(serve) -> None:  # type: ignore[no-untyped-def]
    site, seed, proxy, hostport = await _start(serve, credentials="pu:pp-secret")
    result = await crawl(seed, proxy=f"http://pu:pp-secret@{hostport}", retries=0)
    paths = [path for path, _ in site.log]
    assert sorted(paths) == ["/", "/a", "/b", "/c", "/r", "/robots.txt"]
    assert all(via == VIA for _, via in site.log), site.log  # no request came direct
    assert sorted(URL(u).path for u in proxy.log) == sorted(paths)  # the proxy logged each
    assert proxy.refused == 0 and set(proxy.auth_seen) == {"Basic cHU6cHAtc2VjcmV0"}
    assert all(p.error is None for p in result.pages)


async def test_environment_proxy_and_no_proxy(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    site, seed, proxy, hostport = await _start(serve)
    monkeypatch.setenv("HTTP_PROXY", f"http://{hostport}")
    await crawl(seed, retries=0, max_pages=1, ignore_robots=True)
    assert site.log == [("/", VIA)] and len(proxy.log) == 1
    # NO_PROXY by IP: direct
    site.log.clear()
    monkeypatch.setenv("NO_PROXY", "example.test, 127.0.0.1")
    await crawl(seed, retries=0, max_pages=1, ignore_robots=True)
    assert site.log == [("/", None)] and len(proxy.log) == 1
    # lower-case wins; a network entry
    site.log.clear()
    monkeypatch.setenv("no_proxy", "10.0.0.0/8")
    await crawl(seed, retries=0, max_pages=1, ignore_robots=True)
    assert site.log == [("/", VIA)] and len(proxy.log) == 2
    monkeypatch.setenv("no_proxy", "127.0.0.0/8")
    await crawl(seed, retries=0, max_pages=1, ignore_robots=True)
    assert site.log[-1] == ("/", None)


async def test_proxy_option_overrides_the_environment(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    site, seed, proxy, hostport = await _start(serve)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{_dead_port()}")
    await crawl(seed, proxy=f"http://{hostport}", retries=0, max_pages=1, ignore_robots=True)
    assert site.log == [("/", VIA)] and len(proxy.log) == 1


async def test_an_unreachable_proxy_is_an_error_never_a_direct_connection(serve) -> None:  # type: ignore[no-untyped-def]
    site = ViaSite()
    server = await serve(site.app())
    dead = _dead_port()
    fetcher = Fetcher(CrawlConfig(proxy=f"http://user:hunter22@127.0.0.1:{dead}", retries=1,
                                  backoff=0.001))  # fmt: skip
    try:
        res = await fetcher.fetch(str(server.make_url("/")))
    finally:
        await fetcher.close()
    assert res.error == "proxy" and res.status is None and res.retries == 1
    assert res.error_detail is not None
    assert res.error_detail.startswith(f"proxy http://127.0.0.1:{dead} unreachable (")
    assert "hunter22" not in res.error_detail and "user" not in res.error_detail
    assert site.log == []  # not one request went around it
    for ignore_robots in (True, False):  # with robots.txt: its fetch fails the same way
        result = await crawl(
            str(server.make_url("/")),
            proxy=f"http://127.0.0.1:{dead}",
            retries=0,
            ignore_robots=ignore_robots,
        )
        assert [p.error for p in result.pages] == ["proxy"], ignore_robots
        assert f"proxy http://127.0.0.1:{dead} unreachable" in (result.pages[0].error_detail or "")
    assert site.log == []


async def test_a_proxy_host_that_does_not_resolve_is_a_proxy_error() -> None:
    fetcher = Fetcher(CrawlConfig(proxy="http://no-such-proxy.invalid:3128", retries=0))
    try:
        res = await fetcher.fetch("http://127.0.0.1:9/")
    finally:
        await fetcher.close()
    assert res.error == "proxy", res
    assert "proxy http://no-such-proxy.invalid:3128 unreachable" in (res.error_detail or "")


def test_chooser_rules() -> None:
    http, https = URL("http://a.example.com/"), URL("https://a.example.com/")
    env = {"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:2",
           "HTTPS_PROXY": "http://secure:3"}  # fmt: skip
    chooser = ProxyChooser(environ=env)
    assert str(chooser.for_url(http).url) == "http://lower:2"  # type: ignore[union-attr]
    assert str(chooser.for_url(https).url) == "http://secure:3"  # type: ignore[union-attr]
    # httpoxy: in a CGI environment upper-case HTTP_PROXY may come from a request header
    cgi = ProxyChooser(environ={"HTTP_PROXY": "http://upper:1", "REQUEST_METHOD": "GET"})
    assert cgi.for_url(http) is None
    only = ProxyChooser("http://p:8080", environ={"NO_PROXY": "*"})
    assert only.for_url(http) is None  # NO_PROXY applies to --proxy too (as in curl)
    cases = {
        "example.com": ["http://example.com/", "http://a.example.com/"],
        ".example.com": ["http://example.com/", "http://a.b.example.com/"],
        "example.com:8080": ["http://example.com:8080/"],
        "[::1], 192.168.0.0/16": ["http://[::1]/", "http://192.168.4.5/"],
    }
    not_bypassed = ["http://notexample.com/", "http://example.com:80/", "http://192.169.0.1/"]
    for no_proxy, urls in cases.items():
        chooser = ProxyChooser("http://p:8080", environ={"no_proxy": no_proxy})
        for u in urls:
            assert chooser.for_url(URL(u)) is None, (no_proxy, u)
    chooser = ProxyChooser(
        "http://p:8080", environ={"no_proxy": "example.com:8080, [::1], 192.168.0.0/16"}
    )
    for u in not_bypassed:
        assert chooser.for_url(URL(u)) is not None, u


def test_bad_proxy_urls_name_the_option_and_the_reason() -> None:
    for value, reason in (
        ("127.0.0.1:3128", "not a URL with a scheme"),
        ("https://p:443", "https:// proxies are not supported"),
        ("socks5://p:1080", "socks5:// proxies are not supported"),
        ("http://:3128", "not a URL"),
        ("http://p:3128/path", "has a path"),
        ("ftp://p:21", "not a proxy scheme"),
    ):
        assert reason in (proxy_problem(value) or ""), value
        with pytest.raises(OptionError) as err:
            ProxyChooser(value)
        assert err.value.option == "--proxy" and reason in str(err.value)
    with pytest.raises(OptionError) as err:
        ProxyChooser(environ={"https_proxy": "socks5://u:topsecret@p:1"})
    assert err.value.option == "https_proxy" and "topsecret" not in str(err.value)
    assert "topsecret" not in repr(ProxyChooser("http://u:topsecret@p:1"))


def test_cli_bad_proxy_exits_2() -> None:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "crawler", "crawl", "http://127.0.0.1:9/", "--proxy", "socks5://h:1"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--proxy" in proc.stderr and "not supported" in proc.stderr, proc.stderr


@pytest.fixture
def tls(tmp_path: Path) -> ssl.SSLContext:
    """A server context with a self-signed certificate for 127.0.0.1 (openssl); the client's
    context that trusts it is ``tls.client`` (a copy made here)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    server.client = client  # type: ignore[attr-defined]
    return server


async def _https_site(tls: ssl.SSLContext) -> tuple[ViaSite, web.AppRunner, str]:
    site = ViaSite()
    runner = web.AppRunner(site.app())
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return site, runner, f"https://127.0.0.1:{port}"


async def test_https_goes_through_a_connect_tunnel(tls: ssl.SSLContext) -> None:
    site, runner, origin = await _https_site(tls)
    proxy = TunnelProxy(credentials="tu:tp")
    await proxy.start()
    # the test's CA, trusted through a session of our own (the crawl's session would
    # verify against the system's CAs)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls.client))  # type: ignore[attr-defined]
    fetcher = Fetcher(CrawlConfig(proxy=f"http://tu:tp@127.0.0.1:{proxy.port}", retries=0),
                      session)  # fmt: skip
    try:
        ok = await fetcher.fetch(origin + "/")
        # a target the proxy cannot reach: the proxy's 502 to CONNECT is kind proxy
        dead = await fetcher.fetch(f"https://127.0.0.1:{_dead_port()}/")
        # without the CA: a certificate error of the server's, through the tunnel
        plain = Fetcher(CrawlConfig(proxy=f"http://tu:tp@127.0.0.1:{proxy.port}", retries=0))
        try:
            untrusted = await plain.fetch(origin + "/a")
        finally:
            await plain.close()
    finally:
        await fetcher.close()
        await session.close()
        await proxy.stop()
        await runner.cleanup()
    assert ok.status == 200, ok
    assert site.log == [("/", None)]  # reached over TLS, through the tunnel
    port = origin.rsplit(":", 1)[1]
    assert proxy.log[0] == f"CONNECT 127.0.0.1:{port}"
    assert set(proxy.auth_seen) == {"Basic dHU6dHA="}  # proxy_headers on the CONNECT
    assert dead.error == "proxy" and "refused the tunnel: HTTP 502" in (dead.error_detail or "")
    assert "tp@" not in (dead.error_detail or "")
    # (issue 25: a TLS failure is kind tls, its reason first, through a tunnel too)
    assert untrusted.error == "tls"
    assert (untrusted.error_detail or "").startswith("self-signed certificate (")
