"""Credential headers (``-H 'Authorization: ...'``, ``Cookie``, ``X-Api-Key`` ...) go only to the
seeds' origins, decided per request and per hop; ``--header-for`` and ``--bearer-env``; the
checker's probes carry the crawl's credentials (issue 27, item 1 and item 5's last bullet).

Real servers: the seed on 127.0.0.1, "another host" on 127.0.0.2, "another port" on 127.0.0.1,
and for https -> http one port that speaks both (TLS when the first byte is a ClientHello).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler import crawl
from crawler.check import check
from crawler.cli.options import config_from_args
from crawler.config import ConfigError, CrawlConfig
from crawler.core.settings import CredentialsError, resume, to_stored
from crawler.http.client import Fetcher
from crawler.http.credentials import OriginHeaders
from crawler.http.errors import OptionError
from crawler.http.options import check_options, header_list
from tests.proxyserver import ForwardProxy

TOKEN = "T0KEN-abc-123"
CRED = (f"Authorization: Bearer {TOKEN}", "Cookie: a=b", "X-Api-Key: k3y-value")
PLAIN = "X-Trace: tr4ce"
HEADERS = (*CRED, PLAIN)
WANT = (f"Bearer {TOKEN}", "a=b", "k3y-value")
NONE = (None, None, None)
PROXY_ENV = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)


@dataclass
class Seen:
    """One request a server got: where, what, and the headers under test."""

    site: str
    method: str
    path: str
    creds: tuple[str | None, str | None, str | None]
    trace: str | None


def _record(site: str, log: list[Seen], headers: Any, method: str, path: str) -> None:
    creds = (headers.get("Authorization"), headers.get("Cookie"), headers.get("X-Api-Key"))
    log.append(Seen(site, method, path, creds, headers.get("X-Trace")))


def _app(site: str, log: list[Seen], routes: dict[str, tuple[str, str]]) -> web.Application:
    """Answers by ``routes`` (path -> ("page", html) | ("redirect", url) | ("text", body)),
    a page linking nowhere otherwise; records every request."""

    async def any_path(request: web.Request) -> web.StreamResponse:
        _record(site, log, request.headers, request.method, request.path)
        kind, value = routes.get(request.path, ("page", ""))
        if kind == "redirect":
            raise web.HTTPFound(value)
        if kind == "text":
            return web.Response(text=value)
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        return web.Response(text=f"<html><body>{value}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", any_path)
    return app


Start = Callable[[web.Application, str], Awaitable[str]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """``origin = await start(app, "127.0.0.2")``: a server on that loopback address."""
    servers: list[TestServer] = []

    async def go(app: web.Application, host: str) -> str:
        server = TestServer(app, host=host, port=0)
        await server.start_server()
        servers.append(server)
        return f"http://{host}:{server.port}"

    yield go
    for server in servers:
        await server.close()


@dataclass
class Sites:
    log: list[Seen]
    a: str  # the seed's origin (127.0.0.1)
    b: str  # another host (127.0.0.2)
    c: str  # another port of the seed's host

    def on(self, site: str) -> list[Seen]:
        return [s for s in self.log if s.site == site]


async def _three_sites(start: Start) -> Sites:
    """A links in scope, to B and C, and redirects off to B (and B back to A); A's robots.txt
    redirects to B's (RFC 9309 lets it change hosts); B's names sitemaps on A and C."""
    log: list[Seen] = []
    ra: dict[str, tuple[str, str]] = {}
    rb: dict[str, tuple[str, str]] = {}
    rc: dict[str, tuple[str, str]] = {}
    a = await start(_app("A", log, ra), "127.0.0.1")
    b = await start(_app("B", log, rb), "127.0.0.2")
    c = await start(_app("C", log, rc), "127.0.0.1")
    ra["/robots.txt"] = ("redirect", b + "/robots.txt")
    ra["/"] = ("page", f"<a href='/a'>a</a><a href='/hop'>h</a><a href='{b}/ext'>b</a>"
                       f"<a href='{c}/ext'>c</a>")  # fmt: skip
    ra["/hop"] = ("redirect", b + "/bounce")
    ra["/sitemap.xml"] = ("text", f"<urlset><url><loc>{a}/from-sitemap</loc></url></urlset>")
    rb["/robots.txt"] = ("text", f"User-agent: *\nAllow: /\nSitemap: {a}/sitemap.xml\n"
                                 f"Sitemap: {c}/sitemap.xml\n")  # fmt: skip
    rb["/bounce"] = ("redirect", a + "/back")
    return Sites(log, a, b, c)


def _assert_only_the_seed_origin(sites: Sites) -> None:
    for seen in sites.log:
        want = WANT if seen.site == "A" else NONE
        assert seen.creds == want, seen
        assert seen.trace == "tr4ce", seen  # not a credential: everywhere, as before


@pytest.mark.parametrize("transport", ["plain", "aiohttp", "proxy"])
async def test_crawl_sends_credential_headers_to_the_seed_origin_only(
    start: Start, transport: str, tmp_path: Path
) -> None:
    sites = await _three_sites(start)
    extra: dict[str, Any] = {}
    proxy = ForwardProxy()
    if transport == "aiohttp":  # a cookie jar to save: every request through aiohttp
        extra["save_cookies"] = str(tmp_path / "jar.txt")
    elif transport == "proxy":
        extra["proxy"] = await start(proxy.app(), "127.0.0.1")
    result = await crawl(sites.a + "/", headers=HEADERS, sitemaps=True, retries=0, **extra)
    assert {p.url for p in result.pages} >= {sites.a + "/", sites.a + "/a", sites.a + "/hop"}
    a_paths = {s.path for s in sites.on("A")}
    assert {"/robots.txt", "/", "/a", "/hop", "/sitemap.xml", "/from-sitemap"} <= a_paths
    assert [s.path for s in sites.on("B")] == ["/robots.txt"]  # the robots.txt redirect
    _assert_only_the_seed_origin(sites)
    if transport == "proxy":
        assert len(proxy.log) == len(sites.log)  # every request went through the proxy


@pytest.mark.parametrize("transport", ["plain", "aiohttp"])
async def test_check_probes_send_credential_headers_to_the_seed_origin_only(
    start: Start, transport: str, tmp_path: Path
) -> None:
    sites = await _three_sites(start)
    extra: dict[str, Any] = {}
    if transport == "aiohttp":
        extra["save_cookies"] = str(tmp_path / "jar.txt")
    report = await check(sites.a + "/", headers=HEADERS, retries=0, recheck_delay=0.1, **extra)
    assert report.broken == [], report.broken
    assert {"/ext"} <= {s.path for s in sites.on("C")}
    assert {"/robots.txt", "/ext", "/bounce"} <= {s.path for s in sites.on("B")}
    # the probe of the off-site redirect came back to the seed's origin: with them again
    assert "/back" in {s.path for s in sites.on("A")}
    _assert_only_the_seed_origin(sites)


async def test_header_for_sends_to_exactly_that_origin(start: Start) -> None:
    sites = await _three_sites(start)
    for_b = {sites.b: ["X-Api-Key: only-for-b", "Cookie: b=1"]}
    report = await check(sites.a + "/", headers=(PLAIN,), origin_headers=for_b, retries=0)
    assert report.broken == []
    assert sites.on("B") and sites.on("C") and sites.on("A")
    for seen in sites.log:
        want = (None, "b=1", "only-for-b") if seen.site == "B" else NONE
        assert seen.creds == want, seen
        assert seen.trace == "tr4ce", seen


async def test_bearer_env_goes_to_the_seed_origin_only(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    sites = await _three_sites(start)
    monkeypatch.setenv("CRAWL_TEST_BEARER", TOKEN)
    await check(sites.a + "/", headers=(PLAIN,), bearer_env="CRAWL_TEST_BEARER", retries=0)
    assert sites.on("A") and sites.on("B") and sites.on("C")
    for seen in sites.log:
        want = (f"Bearer {TOKEN}", None, None) if seen.site == "A" else NONE
        assert seen.creds == want, seen


# -- the checker's prober with --auth: in-scope URLs it probes again are not a false 401 --

USER, PASSWORD = "crawl-user", "s3cret-Pa55word"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def _guarded(site: str, log: list[Seen], routes: dict[str, tuple[str, str]], want: str) -> Any:
    """``_app`` behind a credential check: 401 unless Authorization is ``want``."""
    inner = _app(site, log, routes)
    handler = inner.router.routes()._routes[0].handler  # type: ignore[attr-defined]

    async def guard(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != want:
            _record(site, log, request.headers, request.method, request.path)
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="t"'})
        return await handler(request)  # type: ignore[no-any-return]

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", guard)
    return app


@pytest.mark.parametrize(
    ("option", "want"),
    [({"auth": f"{USER}:{PASSWORD}"}, BASIC), ({"headers": (CRED[0],)}, f"Bearer {TOKEN}")],
)
async def test_check_reprobes_in_scope_urls_with_the_credentials(
    start: Start, option: dict[str, Any], want: str
) -> None:
    log: list[Seen] = []
    ra: dict[str, tuple[str, str]] = {}
    rb: dict[str, tuple[str, str]] = {}
    a = await start(_guarded("A", log, ra, want), "127.0.0.1")
    b = await start(_app("B", log, rb), "127.0.0.2")
    ra["/"] = ("page", "<a href='/d1'>1</a><a href='/away'>away</a>")
    ra["/d1"] = ("page", "<a href='/deep'>past --max-depth: probed</a>")
    ra["/away"] = ("redirect", b + "/bounce")  # off the site, then back: probed
    rb["/bounce"] = ("redirect", a + "/back")
    report = await check(a + "/", max_depth=1, retries=0, recheck_delay=0.1, **option)
    assert report.broken == [], [(p.url, p.error) for p in report.broken]
    a_seen = [(s.method, s.path) for s in log if s.site == "A"]
    assert ("HEAD", "/deep") in a_seen and ("HEAD", "/back") in a_seen
    assert all(s.creds[0] == want for s in log if s.site == "A"), log  # never a 401
    assert all(s.creds == NONE for s in log if s.site == "B"), log


# -- https seed -> http on the SAME host and port: a new origin, nothing in clear text --


class DualServer:
    """One port, two schemes: a connection whose first byte is a TLS handshake (0x16) is
    served over TLS, any other as plain HTTP. Each request: (scheme, method, path, headers)."""

    def __init__(self, ctx: ssl.SSLContext, routes: dict[str, tuple[str, str]]) -> None:
        self.ctx = ctx
        self.routes = routes
        self.log: list[tuple[str, str, str, dict[str, str]]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            scheme = "http"
            if conn.recv(1, socket.MSG_PEEK) == b"\x16":
                conn = self.ctx.wrap_socket(conn, server_side=True)
                scheme = "https"
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, target, _ = head[0].split(" ", 2)
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.log.append((scheme, method, target, headers))
            kind, value = self.routes.get(target, ("page", ""))
            if target == "/robots.txt":
                kind, value = "text", "User-agent: *\nAllow: /\n"
            body = value.encode() if kind == "text" else f"<html>{value}</html>".encode()
            status = "302 Found" if kind == "redirect" else "200 OK"
            ctype = "text/plain" if kind == "text" else "text/html"
            extra = f"Location: {value}\r\n" if kind == "redirect" else ""
            body = b"" if kind == "redirect" or method == "HEAD" else body
            conn.sendall(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n{extra}"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
        except (OSError, ValueError):
            pass
        finally:
            conn.close()


@pytest.fixture
def dual(tmp_path: Path) -> Iterator[tuple[DualServer, Path]]:
    """A DualServer with a self-signed certificate for 127.0.0.1 (openssl), and the cert."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    server = DualServer(ctx, {})
    yield server, cert
    server.close()


def _run(
    args: list[str], cert: Path, tmp_path: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in PROXY_ENV}
    environ.update(SSL_CERT_FILE=str(cert), **env)
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args],
        capture_output=True, text=True, timeout=120, env=environ, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("command", ["crawl", "check"])
def test_an_https_seed_sends_nothing_over_http_to_the_same_host_and_port(
    dual: tuple[DualServer, Path], tmp_path: Path, command: str
) -> None:
    server, cert = dual
    port = server.port
    plain = f"http://127.0.0.1:{port}"
    server.routes.update(
        {
            "/": ("page", "<a href='/hop'>h</a><a href='/d1'>1</a>"),
            "/hop": ("redirect", plain + "/plain"),  # crawled: https -> http, same host:port
            "/d1": ("page", "<a href='/deep'>d</a>"),
            "/deep": ("redirect", plain + "/plain2"),  # past --max-depth: the checker's probe
        }
    )
    flags = [f for h in HEADERS for f in ("-H", h)]
    args = [command, f"https://127.0.0.1:{port}/", *flags, "--retries", "0", "-q"]
    if command == "check":
        args += ["--max-depth", "1", "--recheck-delay", "0.1"]
    proc = _run(args, cert, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    schemes = {(scheme, path) for scheme, _, path, _ in server.log}
    assert ("https", "/") in schemes and ("http", "/plain") in schemes
    if command == "check":
        assert ("https", "/deep") in schemes and ("http", "/plain2") in schemes
    for scheme, method, path, headers in server.log:
        got = (headers.get("authorization"), headers.get("cookie"), headers.get("x-api-key"))
        assert got == (WANT if scheme == "https" else NONE), (scheme, method, path, headers)
        assert headers.get("x-trace") == "tr4ce"
    assert TOKEN not in proc.stdout + proc.stderr


# -- the CLI: --header-for, --bearer-env; never printed, never stored --


def test_cli_header_for_and_bearer_env(tmp_path: Path) -> None:
    """A crawl kept with --state: the token and the --header-for value are not in the state's
    files nor on stdout/stderr; a resumed run without them is refused."""
    log: list[Seen] = []
    done = threading.Event()
    holder: dict[str, Any] = {}

    def serve() -> None:
        async def main() -> None:
            runner_b = web.AppRunner(_app("B", log, {}))
            await runner_b.setup()
            site_b = web.TCPSite(runner_b, "127.0.0.2", 0)
            await site_b.start()
            b = f"http://127.0.0.2:{runner_b.addresses[0][1]}"
            runner_a = web.AppRunner(
                _app("A", log, {"/robots.txt": ("redirect", b + "/robots.txt")})
            )
            await runner_a.setup()
            site_a = web.TCPSite(runner_a, "127.0.0.1", 0)
            await site_a.start()
            holder["a"], holder["b"] = f"http://127.0.0.1:{runner_a.addresses[0][1]}", b
            holder["stop"] = asyncio.Event()
            done.set()
            await holder["stop"].wait()
            await runner_a.cleanup()
            await runner_b.cleanup()

        holder["loop"] = asyncio.new_event_loop()
        holder["loop"].run_until_complete(main())

    thread = threading.Thread(target=serve)
    thread.start()
    assert done.wait(10)
    try:
        a, b = holder["a"], holder["b"]
        env = {k: v for k, v in os.environ.items() if k not in PROXY_ENV}
        env["CRAWL_TEST_BEARER"] = TOKEN
        state = tmp_path / "st"
        base = [sys.executable, "-m", "crawler", "crawl", "--state", str(state)]
        args = [*base, a + "/", "--bearer-env", "CRAWL_TEST_BEARER", "--retries", "0",
                "--header-for", b, "X-Api-Key: for-b-0nly", "--format", "jsonl"]  # fmt: skip
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0, proc.stderr
        assert {s.site for s in log} == {"A", "B"}
        for seen in log:
            want = (
                (f"Bearer {TOKEN}", None, None) if seen.site == "A" else (None, None, "for-b-0nly")
            )
            assert seen.creds == want, seen
        out = proc.stdout + proc.stderr
        assert TOKEN not in out and "for-b-0nly" not in out
        stored = b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file())
        assert TOKEN.encode() not in stored and b"for-b-0nly" not in stored
        assert b"CRAWL_TEST_BEARER" in stored  # the variable's name, as auth_env
        status = subprocess.run(
            [sys.executable, "-m", "crawler", "status", "--state", str(state)],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert status.returncode == 0 and TOKEN not in status.stdout + status.stderr
        assert "for-b-0nly" not in status.stdout + status.stderr
        # a resumed run without --header-for: refused, naming it (not a silent crawl without it)
        again = subprocess.run(
            [*base, "--max-pages", "0"], capture_output=True, text=True, timeout=60, env=env
        )
        assert again.returncode == 2 and "--header-for" in again.stderr, again.stderr
        # an unset variable: exit 2 before anything is fetched
        del env["CRAWL_TEST_BEARER"]
        unset = subprocess.run(
            [*base[:4], a + "/", "--bearer-env", "CRAWL_TEST_BEARER"],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert unset.returncode == 2 and "--bearer-env" in unset.stderr
        assert "CRAWL_TEST_BEARER is not set" in unset.stderr
    finally:
        loop = holder["loop"]
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(10)
        loop.close()


# -- the rules, without a server --


def test_origin_headers_units() -> None:
    seed = "https://a.test/start"
    config = CrawlConfig(
        seeds=(seed,),
        headers=HEADERS,
        origin_headers={
            "https://api.test": ("X-Api-Key: api-k3y",),
            "https://a.test": ("Cookie: c=d",),
        },
    ).validated()
    creds = OriginHeaders(config, environ={})
    assert creds.origins == [("https", "a.test", 443), ("https", "api.test", 443)]
    # --header-for's Cookie replaces the seed's (-H) for its origin
    assert creds.for_url(seed) == (
        ("Authorization", f"Bearer {TOKEN}"),
        ("X-Api-Key", "k3y-value"),
        ("Cookie", "c=d"),
    )
    for elsewhere in (
        "http://a.test/",  # https -> http: another origin
        "https://a.test:8443/",  # another port
        "https://www.a.test/",  # another host
        "https://a.test.evil.test/",
    ):
        assert creds.for_url(elsewhere) is None, elsewhere
    assert creds.for_url("https://api.test/v1") == (("X-Api-Key", "api-k3y"),)
    # every request's common headers: not the credentials
    common = [name for name, _ in header_list(config)]
    assert common == ["User-Agent", "Accept", "X-Trace"]
    # redaction: the values never leave in a message
    text = creds.redact(f"boom {TOKEN} k3y-value api-k3y")
    assert TOKEN not in text and "k3y-value" not in text and "api-k3y" not in text
    assert TOKEN not in repr(creds)


def test_bearer_env_and_basic_auth() -> None:
    seeds = ("http://a.test/",)
    config = CrawlConfig(seeds=seeds, bearer_env="TOK", headers=(CRED[0].replace(TOKEN, "x"),))
    creds = OriginHeaders(config.validated(), environ={"TOK": " t0k "})
    assert creds.for_url("http://a.test/x") == (("Authorization", "Bearer t0k"),)
    with pytest.raises(OptionError) as err:
        OriginHeaders(config, environ={})
    assert err.value.option == "--bearer-env" and "TOK is not set" in str(err.value)
    with pytest.raises(ConfigError, match="bearer_env: cannot be given with auth"):
        CrawlConfig(seeds=seeds, bearer_env="TOK", auth="u:p").validated()
    # Basic auth wins over an Authorization header for its origin
    both = CrawlConfig(seeds=seeds, headers=(CRED[0],), auth=f"{USER}:{PASSWORD}").validated()
    assert dict(OriginHeaders(both).for_url("http://a.test/") or ()) == {"Authorization": BASIC}
    with pytest.raises(OptionError) as err:
        check_options(CrawlConfig(origin_headers={"https://a.test/path": ("X-A: b",)}))
    assert err.value.option == "--header-for"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"a.test": ["X-A: b"]}, "is not an origin"),
        ({"https://a.test/x": ["X-A: b"]}, "only scheme, host and port"),
        ({"https://a.test": ["no colon here"]}, "item 0: 'no ...' is not 'Name: value'"),
        ({"https://a.test": [1]}, "must be a list of 'Name: value' strings"),
        ("X-A: b", "must be a table"),
    ],
)
def test_origin_headers_config_errors_never_show_a_value(value: object, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        CrawlConfig(origin_headers=value).validated()  # type: ignore[arg-type]
    assert err.value.key == "origin_headers" and reason in str(err.value), str(err.value)
    assert "X-A: b" not in str(err.value)


def test_toml_table_and_the_flag(tmp_path: Path) -> None:
    from crawler.cli.main import build_parser  # noqa: PLC0415

    path = tmp_path / "c.toml"
    path.write_text(
        '[http.origin_headers]\n"https://api.test" = ["X-Api-Key: k", "X-B: c"]\n'
        '[http]\nbearer_env = "TOK"\n'
    )
    parser = build_parser()
    args = parser.parse_args(["crawl", "http://a.test/", "--config", str(path)])
    config = config_from_args(args)
    assert config.origin_headers == {"https://api.test": ("X-Api-Key: k", "X-B: c")}
    assert config.bearer_env == "TOK"
    args = parser.parse_args(
        ["crawl", "http://a.test/", "--header-for", "https://x.test", "X-A: 1",
         "--header-for", "https://x.test", "X-B: 2", "--header-for", "http://y.test:81", "C: 3"]
    )  # fmt: skip
    config = config_from_args(args)
    assert config.origin_headers == {
        "https://x.test": ("X-A: 1", "X-B: 2"),
        "http://y.test:81": ("C: 3",),
    }
    assert "X-A: 1" not in repr(config)


def test_resume_needs_header_for_and_bearer_env_again() -> None:
    first = CrawlConfig(
        seeds=("http://a.test/",),
        bearer_env="TOK",
        origin_headers={"https://api.test": ("X-Api-Key: s3cret-value",)},
    ).validated()
    stored = json.loads(json.dumps(to_stored(first)))
    assert "s3cret-value" not in json.dumps(stored)
    assert stored["run"]["bearer_env"] == "TOK"
    assert stored["credentials"]["--header-for"] == ["https://api.test:443"]
    with pytest.raises(CredentialsError, match="--header-for for https://api.test:443"):
        resume(stored, CrawlConfig().validated(), given=set())
    again = resume(stored, first.replace(seeds=()).validated(), given={"origin_headers"})
    assert again.bearer_env == "TOK" and again.origin_headers == first.origin_headers
    # a worker of a shared crawl never takes the variable's name from the state: it gives it
    worker = CrawlConfig(state="redis://127.0.0.1:6379/0", origin_headers=first.origin_headers)
    with pytest.raises(CredentialsError, match="--bearer-env for http://a.test:80"):
        resume(stored, worker.validated(), given={"origin_headers"})


async def test_a_fetcher_without_credentials_adds_nothing(start: Start) -> None:
    """The common crawl: no credentials, the shared head only (and a direct session request,
    the checker's, gets no headers of its own)."""
    log: list[Seen] = []
    a = await start(_app("A", log, {}), "127.0.0.1")
    fetcher = Fetcher(CrawlConfig(seeds=(a + "/",), headers=(PLAIN,), retries=0))
    try:
        res = await fetcher.fetch(a + "/")
        assert "headers" not in fetcher.session_request(a + "/")[1]
    finally:
        await fetcher.close()
    assert res.status == 200 and log[0].creds == NONE and log[0].trace == "tr4ce"
