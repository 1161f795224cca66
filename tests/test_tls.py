"""https on the crawler's own HTTP/1.1 path and through aiohttp: real TLS servers on 127.0.0.1
with certificates of a local test CA (trustme), valid and every way a certificate fails.

* https goes through the plain path (not aiohttp) when nothing needs aiohttp, with SNI, ALPN
  ``http/1.1`` and keep-alive: one TLS handshake per connection, counted by the server.
* A second connection to an origin resumes the first's TLS 1.3 session.
* Every failure is the error kind ``tls`` with its reason, on both transports (aiohttp's when a
  cookie jar is in use): expired, not yet valid, hostname mismatch, self-signed, unknown CA,
  client certificate required.
* ``--client-cert`` / ``--client-key`` (also encrypted, with its passphrase from the
  environment) are presented to a server that requires one; ``--insecure`` accepts anything.

The command line (its options, its errors at start, the reports of ``crawl`` and ``check``)
is in tests/test_tls_cli.py.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiohttp import web

from crawler.config import CrawlConfig
from crawler.http.client import Fetcher
from tests.test_http1 import split_http_url

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)


@dataclass
class Pki:
    """The test CA, its files and the server certificates of every case."""

    ca: trustme.CA
    ca_file: Path
    other_ca: trustme.CA  # a CA nobody trusts
    files: Path
    certs: dict[str, Any] = field(default_factory=dict)

    def server_context(self, case: str, *, client_ca: bool = False) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.set_alpn_protocols(["http/1.1"])
        if case == "self-signed":  # the other CA's own certificate: self-signed, alone
            cert = self.files / "self.pem"
            cert.write_bytes(self.other_ca.cert_pem.bytes() + self.other_ca.private_key_pem.bytes())
            context.load_cert_chain(cert)
        else:
            self.certs[case].configure_cert(context)
        if client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            self.ca.configure_trust(context)
        return context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    files = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    other = trustme.CA()
    ca_file = files / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    pki = Pki(ca, ca_file, other, files)
    pki.certs = {
        "valid": ca.issue_cert("127.0.0.1", "localhost"),
        "expired": ca.issue_cert("127.0.0.1", not_before=NOW - 10 * DAY, not_after=NOW - DAY),
        "not-yet-valid": ca.issue_cert("127.0.0.1", not_before=NOW + DAY, not_after=NOW + 9 * DAY),
        "wrong-host": ca.issue_cert("wrong.example.test"),
        "unknown-ca": other.issue_cert("127.0.0.1"),
        "client": ca.issue_cert("client.example.test"),
    }
    return pki


@dataclass
class TlsSite:
    """A TLS server's record of what came: handshakes (the SNI callback runs once per
    handshake), the names asked for, the connections, requests and resumed sessions."""

    port: int = 0
    handshakes: int = 0
    sni: list[str | None] = field(default_factory=list)
    # the connections themselves, kept: an id() is reused once its object is gone
    connections: set[object] = field(default_factory=set)
    requests: int = 0
    resumed: int = 0
    alpn: set[str | None] = field(default_factory=set)
    client_subjects: list[Any] = field(default_factory=list)

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"


StartSite = Callable[..., Awaitable[TlsSite]]


class BlockingTlsServer:
    """A TLS server on blocking sockets in a thread, for the sites that require a client
    certificate: OpenSSL sends its alert (``certificate required``) on the socket before it
    closes, where asyncio's server closes without flushing it. Answers each GET with a page,
    keeps the connection alive; records into ``site`` as the asyncio sites do."""

    def __init__(self, context: ssl.SSLContext, site: TlsSite) -> None:
        self.context = context
        self.site = site
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        site.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                raw, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._connection, args=(raw,), daemon=True).start()

    def _connection(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        site = self.site
        try:
            with self.context.wrap_socket(
                raw, server_side=True, do_handshake_on_connect=False
            ) as conn:
                try:
                    conn.do_handshake()
                except ssl.SSLError:  # the alert is out: close as nginx does (lingering), no RST
                    socket.socket.shutdown(conn, socket.SHUT_WR)
                    while socket.socket.recv(conn, 65536):
                        pass
                    return
                site.connections.add(conn)
                site.resumed += bool(conn.session_reused)
                site.alpn.add(conn.selected_alpn_protocol())
                site.client_subjects.append(conn.getpeercert())
                buffered = b""
                while True:
                    while b"\r\n\r\n" not in buffered:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buffered += data
                    _, _, buffered = buffered.partition(b"\r\n\r\n")
                    site.requests += 1
                    body = b"<p>leaf</p>"
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
                        + str(len(body)).encode()
                        + b"\r\n\r\n"
                        + body
                    )
        except (OSError, ssl.SSLError):
            return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
async def tls_site(pki: Pki) -> AsyncIterator[StartSite]:
    """``site = await tls_site(case)``: a site of 40 small pages served with ``case``'s
    certificate (``client_ca=True``: a client certificate of the test CA is required)."""
    runners: list[web.AppRunner] = []
    blocking: list[BlockingTlsServer] = []

    async def start(case: str, *, client_ca: bool = False) -> TlsSite:
        site = TlsSite()
        context = pki.server_context(case, client_ca=client_ca)

        def on_sni(sslobj: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
            site.handshakes += 1
            site.sni.append(name)

        context.sni_callback = on_sni  # type: ignore[assignment]
        if client_ca:
            blocking.append(BlockingTlsServer(context, site))
            return site

        async def handler(request: web.Request) -> web.Response:
            site.requests += 1
            transport = request.transport
            assert transport is not None
            if transport not in site.connections:
                site.connections.add(transport)
                sslobj = transport.get_extra_info("ssl_object")
                site.resumed += bool(sslobj.session_reused)
                site.alpn.add(sslobj.selected_alpn_protocol())
                site.client_subjects.append(transport.get_extra_info("peercert"))
            if request.path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n")
            links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(40))
            body = links if request.path == "/" else "<p>leaf</p>"
            return web.Response(text=body, content_type="text/html")

        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
        site.port = runner.addresses[0][1]
        return site

    yield start
    for runner in runners:
        await runner.cleanup()
    for server in blocking:
        await asyncio.to_thread(server.close)


def config(pki: Pki, **changes: Any) -> CrawlConfig:
    base: dict[str, Any] = {"ca_cert": str(pki.ca_file), "retries": 0, "timeout": 10.0}
    base.update(changes)
    return CrawlConfig(**base)


# -- the request URL --


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("https://example.org/", (True, "example.org", 443, "example.org", "/")),
        ("https://example.org:8443/a?b", (True, "example.org", 8443, "example.org:8443", "/a?b")),
        ("http://example.org/", (False, "example.org", 80, "example.org", "/")),
        ("https://[::1]:4443/x", (True, "::1", 4443, "[::1]:4443", "/x")),
        ("https://EXAMPLE.org/%7e", (True, "EXAMPLE.org", 443, "EXAMPLE.org", "/%7e")),
    ],
)
def test_split_url_reads_https_and_http(url: str, parts: tuple[Any, ...]) -> None:
    from crawler.http.http1 import split_url  # noqa: PLC0415

    assert split_url(url) == parts
    assert split_http_url(url) == (None if parts[0] else parts[1:])


@pytest.mark.parametrize("url", ["https://u:p@example.org/", "https://example.org:0/", "ftp://x/"])
def test_split_url_leaves_the_rest_to_aiohttp(url: str) -> None:
    from crawler.http.http1 import split_url  # noqa: PLC0415

    assert split_url(url) is None


# -- the plain path --


async def test_https_takes_the_plain_path_one_handshake_per_connection(
    pki: Pki, tls_site: StartSite
) -> None:
    site = await tls_site("valid")
    fetcher = Fetcher(config(pki, concurrency=2, per_host=2))
    try:
        results = await asyncio.gather(*(fetcher.fetch(site.url(f"/p{i}")) for i in range(40)))
        assert [r.status for r in results] == [200] * 40
        assert all(r.error is None for r in results)
        assert fetcher._prep._aio is None  # aiohttp's path never made: the plain path fetched
        pool = fetcher._prep.plain.pool
        assert pool is not None
        # keep-alive held: 40 pages over at most 2 connections, one handshake each
        assert site.requests == 40
        assert 1 <= len(site.connections) <= 2
        assert site.handshakes == len(site.connections) == pool.tls_handshakes
        assert site.alpn == {"http/1.1"}  # ALPN offered and agreed
    finally:
        await fetcher.close()


async def test_sni_names_the_host_and_the_certificate_is_checked_against_it(
    pki: Pki, tls_site: StartSite
) -> None:
    site = await tls_site("valid")
    fetcher = Fetcher(config(pki))
    try:
        res = await fetcher.fetch(site.url("/", host="localhost"))
        assert res.status == 200, res.error_detail
        assert site.sni == ["localhost"]
    finally:
        await fetcher.close()


async def test_a_new_connection_resumes_the_origins_tls_session(
    pki: Pki, tls_site: StartSite
) -> None:
    site = await tls_site("valid")
    fetcher = Fetcher(config(pki))
    try:
        assert (await fetcher.fetch(site.url("/p1"))).status == 200
        pool = fetcher._prep.plain.pool
        assert pool is not None
        pool.close()  # the kept connection gone: the next request needs a new one
        assert (await fetcher.fetch(site.url("/p2"))).status == 200
        assert site.handshakes == 2 and len(site.connections) == 2
        assert site.resumed == 1 and pool.tls_resumed == 1  # the second: no full handshake
    finally:
        await fetcher.close()


# -- failures: kind tls and the reason, on both transports --

CASES = [
    ("expired", {}, "certificate has expired"),
    ("not-yet-valid", {}, "certificate is not yet valid"),
    ("wrong-host", {}, "hostname mismatch"),
    ("self-signed", {}, "self-signed certificate"),
    ("unknown-ca", {}, "unknown CA"),
    ("valid", {"client_ca": True}, "client certificate required"),
]


@pytest.mark.parametrize("transport", ["plain", "aiohttp"])
@pytest.mark.parametrize(("case", "server", "reason"), CASES, ids=[c[0] for c in CASES])
async def test_a_tls_failure_is_kind_tls_with_its_reason(
    pki: Pki,
    tls_site: StartSite,
    tmp_path: Path,
    transport: str,
    case: str,
    server: dict[str, Any],
    reason: str,
) -> None:
    site = await tls_site(case, **server)
    # a cookie jar in use sends every request through aiohttp
    extra = {"save_cookies": str(tmp_path / "jar.txt")} if transport == "aiohttp" else {}
    fetcher = Fetcher(config(pki, **extra))
    try:
        res = await fetcher.fetch(site.url("/"))
        assert fetcher.plain_http is (transport == "plain")
        assert (res.error, res.status) == ("tls", None), res.error_detail
        assert res.error_detail is not None
        assert res.error_detail.startswith(reason + " ("), res.error_detail
        if transport == "plain":
            assert fetcher._prep._aio is None
    finally:
        await fetcher.close()


async def test_the_system_store_is_replaced_by_ca_cert(pki: Pki, tls_site: StartSite) -> None:
    """Without --ca-cert the test CA is unknown (the system's store does not have it)."""
    site = await tls_site("valid")
    fetcher = Fetcher(CrawlConfig(retries=0))
    try:
        res = await fetcher.fetch(site.url("/"))
        assert res.error == "tls" and res.error_detail is not None
        assert res.error_detail.startswith("unknown CA (")
    finally:
        await fetcher.close()


# -- client certificates, --insecure --


def _client_files(pki: Pki, tmp_path: Path) -> dict[str, Path]:
    client = pki.certs["client"]
    both = tmp_path / "client-both.pem"
    client.private_key_and_cert_chain_pem.write_to_path(str(both))
    cert = tmp_path / "client-cert.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
    key = tmp_path / "client-key.pem"
    client.private_key_pem.write_to_path(str(key))
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    loaded = serialization.load_pem_private_key(client.private_key_pem.bytes(), None)
    encrypted = tmp_path / "client-key-encrypted.pem"
    encrypted.write_bytes(
        loaded.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret-passphrase"),
        )
    )
    return {"both": both, "cert": cert, "key": key, "encrypted": encrypted}


@pytest.mark.parametrize("transport", ["plain", "aiohttp"])
@pytest.mark.parametrize("layout", ["key in the cert file", "key apart", "encrypted key"])
async def test_a_client_certificate_is_presented(
    pki: Pki,
    tls_site: StartSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
    layout: str,
) -> None:
    files = _client_files(pki, tmp_path)
    options: dict[str, Any] = {
        "key in the cert file": {"client_cert": str(files["both"])},
        "key apart": {"client_cert": str(files["cert"]), "client_key": str(files["key"])},
        "encrypted key": {
            "client_cert": str(files["cert"]),
            "client_key": str(files["encrypted"]),
            "client_key_password_env": "TEST_CLIENT_KEY_PASS",
        },
    }[layout]
    monkeypatch.setenv("TEST_CLIENT_KEY_PASS", "s3cret-passphrase")
    if transport == "aiohttp":
        options["save_cookies"] = str(tmp_path / "jar.txt")
    site = await tls_site("valid", client_ca=True)
    fetcher = Fetcher(config(pki, **options))
    try:
        res = await fetcher.fetch(site.url("/"))
        assert (res.status, res.error) == (200, None), res.error_detail
        subject = dict(x[0] for x in site.client_subjects[0]["subject"])
        assert subject.get("organizationalUnitName", "").startswith("Testing cert")
    finally:
        await fetcher.close()


@pytest.mark.parametrize("transport", ["plain", "aiohttp"])
async def test_insecure_accepts_a_self_signed_certificate(
    tls_site: StartSite, tmp_path: Path, transport: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import crawler.http.tls_context as tls_context  # noqa: PLC0415

    tls_context._warned = False  # (once a process: this test's process)
    tls_context._clients.clear()  # (a client is made, and warns, once per options)
    site = await tls_site("self-signed")
    extra = {"save_cookies": str(tmp_path / "jar.txt")} if transport == "aiohttp" else {}
    fetchers = [Fetcher(CrawlConfig(insecure=True, retries=0, **extra)) for _ in range(2)]
    try:
        for fetcher in fetchers:
            res = await fetcher.fetch(site.url("/"))
            assert (res.status, res.error) == (200, None), res.error_detail
    finally:
        for fetcher in fetchers:
            await fetcher.close()
    assert capsys.readouterr().err.count("--insecure: TLS certificates") == 1


async def test_the_address_guard_holds_for_https(pki: Pki, tls_site: StartSite) -> None:
    """--exclude-loopback refuses the resolved address before any TLS handshake."""
    site = await tls_site("valid")
    fetcher = Fetcher(config(pki, exclude_loopback=True))
    try:
        res = await fetcher.fetch(site.url("/", host="localhost"))
        assert res.error == "blocked_address", res.error_detail
        assert site.handshakes == 0 and site.requests == 0
        assert fetcher._prep._aio is None  # refused on the plain path
    finally:
        await fetcher.close()


async def test_two_origins_of_one_host_each_resume_their_own_session(
    pki: Pki, tls_site: StartSite
) -> None:
    """Sessions are kept by origin (host and port): two servers on 127.0.0.1, connections
    alternating between them, each resumes its own (kept by host name only, each would offer
    the other's, refused: never a resumption)."""
    a, b = await tls_site("valid"), await tls_site("valid")
    fetcher = Fetcher(config(pki))
    try:
        for _ in range(3):
            for site in (a, b):
                assert (await fetcher.fetch(site.url("/p1"))).status == 200
                pool = fetcher._prep.plain.pool
                assert pool is not None
                pool.close()  # a new connection each time
        assert (a.handshakes, b.handshakes) == (3, 3)
        assert (a.resumed, b.resumed) == (2, 2)
    finally:
        await fetcher.close()
