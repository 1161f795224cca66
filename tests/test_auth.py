"""HTTP Basic auth: only to the origins it is for, decided per hop, never printed."""

from __future__ import annotations

import asyncio
import base64
import gzip
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from aiohttp import web
from yarl import URL

from crawler import crawl
from crawler.config import CrawlConfig
from crawler.http.auth import REDACTED, AuthMap, origin_key, redact_userinfo
from crawler.http.client import Fetcher
from crawler.http.errors import OptionError
from crawler.http.options import check_options
from tests.authsite import PASSWORD, TOKEN, USER, AuthSite, LogSite

CRED = f"{USER}:{PASSWORD}"


async def _sites(serve):  # type: ignore[no-untyped-def]
    log = LogSite()
    log_server = await serve(log.app())
    other = str(log_server.make_url("")).rstrip("/")
    site = AuthSite(away=other)
    server = await serve(site.app())
    origin = str(server.make_url("")).rstrip("/")
    return site, origin, log, other


async def test_credentials_go_to_the_seed_origin_and_not_after_a_redirect_off_it(serve) -> None:  # type: ignore[no-untyped-def]
    site, origin, log, other = await _sites(serve)
    fetcher = Fetcher(CrawlConfig(seeds=(origin + "/",), auth=CRED, retries=0))
    try:
        res = await fetcher.fetch(origin + "/")
        assert res.status == 200, res
        hop = await fetcher.fetch(origin + "/away")
        assert hop.status == 302 and hop.location == other + "/landing"
        # the page job follows the hop itself: the next request is to another origin
        landed = await fetcher.fetch(hop.location)
        assert landed.status == 200
    finally:
        await fetcher.close()
    assert site.ok == ["/", "/away"] and site.refused == []
    assert log.seen == [("/landing", None)]


async def test_without_credentials_the_site_refuses(serve) -> None:  # type: ignore[no-untyped-def]
    site, origin, _log, _other = await _sites(serve)
    fetcher = Fetcher(CrawlConfig(retries=0))
    try:
        res = await fetcher.fetch(origin + "/")
    finally:
        await fetcher.close()
    assert res.status == 401 and res.error == "http_401"
    assert site.refused == ["/"]


async def test_crawl_with_origin_auth_sends_it_to_that_origin_only(serve) -> None:  # type: ignore[no-untyped-def]
    site, origin, log, other = await _sites(serve)
    # Both origins are seeds (so the redirect target is in scope and IS fetched), the
    # credentials are for the auth site's origin only.
    result = await crawl(
        [origin + "/", other + "/"], origin_auth={origin: CRED}, retries=0, concurrency=4
    )
    fetched = {p.url: p.status for p in result.pages}
    assert fetched[origin + "/a"] == 200 and fetched[origin + "/b"] == 200
    assert site.refused == []
    assert {"/", "/a", "/b", "/away", "/robots.txt"} <= set(site.ok)
    assert ("/landing", None) in log.seen  # the redirect target was fetched, without it
    assert all(auth is None for _path, auth in log.seen), log.seen


async def test_auth_env_reads_the_variable_at_start(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    site, origin, _log, _other = await _sites(serve)
    monkeypatch.setenv("CRAWL_TEST_CRED", CRED)
    result = await crawl(origin + "/", auth_env="CRAWL_TEST_CRED", retries=0)
    assert site.refused == [] and len(result.pages) >= 3
    monkeypatch.delenv("CRAWL_TEST_CRED")
    with pytest.raises(OptionError) as err:
        Fetcher(CrawlConfig(seeds=(origin + "/",), auth_env="CRAWL_TEST_CRED"))
    assert err.value.option == "--auth-env" and "CRAWL_TEST_CRED is not set" in str(err.value)


async def test_userinfo_in_a_url_is_never_sent(serve) -> None:  # type: ignore[no-untyped-def]
    """aiohttp turns ``http://u:p@host/`` into Basic auth; the fetcher drops the userinfo."""
    log = LogSite()
    server = await serve(log.app())
    url = str(server.make_url("/x")).replace("http://", "http://someone:leaked@")
    fetcher = Fetcher(CrawlConfig(retries=0))
    try:
        res = await fetcher.fetch(url)
    finally:
        await fetcher.close()
    assert res.status == 200
    assert log.seen == [("/x", None)]


def test_origins_are_scheme_host_port() -> None:
    amap = AuthMap(
        ["HTTP://Example.ORG/start", "https://b\u00fccher.test:8443/x"],
        auth=CRED,
        origin_auth={"http://other.test:8080": "o:pw"},
    )
    assert amap.origins == [
        ("http", "example.org", 80),
        ("http", "other.test", 8080),
        ("https", "xn--bcher-kva.test", 8443),
    ]
    assert amap.header_for(URL("http://example.org:80/a")) == f"Basic {TOKEN}"
    for elsewhere in (
        "https://example.org/",  # another scheme
        "http://example.org:8080/",  # another port
        "http://www.example.org/",  # a subdomain is another origin
        "http://example.org.evil.test/",
    ):
        assert amap.header_for(URL(elsewhere)) is None, elsewhere
    other = "Basic " + base64.b64encode(b"o:pw").decode()
    assert amap.header_for(URL("http://other.test:8080/")) == other
    assert origin_key("ftp://x/") is None


def test_bad_credentials_name_the_option_never_the_secret() -> None:
    with pytest.raises(OptionError) as err:
        AuthMap(["http://a.test/"], auth="no-colon-" + PASSWORD)
    assert err.value.option == "--auth" and PASSWORD not in str(err.value)
    with pytest.raises(OptionError) as err:
        AuthMap([], origin_auth={"http://a.test/path": CRED})
    assert "is not an origin" in str(err.value) and PASSWORD not in str(err.value)
    with pytest.raises(OptionError):
        check_options(CrawlConfig(seeds=("http://a.test/",), auth="nocolon"))
    assert PASSWORD not in repr(AuthMap(["http://a.test/"], auth=CRED))


def test_redact_removes_passwords_tokens_and_userinfo() -> None:
    amap = AuthMap(["http://a.test/"], auth=CRED)
    text = f"boom http://x:y@h.test/p Authorization: Basic {TOKEN} pw={PASSWORD}"
    out = amap.redact(text)
    assert PASSWORD not in out and TOKEN not in out and "x:y@" not in out
    assert out.count(REDACTED) == 2 and "http://h.test/p" in out
    assert redact_userinfo("see https://u@h/ and HTTP://a:b@c/") == "see https://h/ and HTTP://c/"


def test_cli_output_never_holds_the_credential(serve_thread, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real CLI crawl (jsonl, progress on stderr, a 401, an unreachable hop): no secret."""
    origin, other_dead = serve_thread
    env = dict(os.environ, CRAWL_TEST_CRED=CRED)
    for extra in (["--auth", CRED], ["--auth-env", "CRAWL_TEST_CRED"]):
        proc = subprocess.run(
            [sys.executable, "-m", "crawler", "crawl", origin + "/", other_dead + "/",
             "--format", "jsonl", "--retries", "0", "--connect-timeout", "2", *extra],
            capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
        )  # fmt: skip
        both = proc.stdout + proc.stderr
        assert '"status": 200' in proc.stdout or '"status":200' in proc.stdout, both
        assert PASSWORD not in both and TOKEN not in both, both


@pytest.fixture
def serve_thread():  # type: ignore[no-untyped-def]
    """The auth site in a thread of its own (the CLI runs in a subprocess), plus a dead port."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        site = AuthSite(away="http://127.0.0.1:9")
        runner = web.AppRunner(site.app())
        await runner.setup()
        tcp = web.TCPSite(runner, "127.0.0.1", 0)
        await tcp.start()
        holder["runner"] = runner
        holder["port"] = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()))
    thread.start()
    ready.wait(10)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    yield f"http://127.0.0.1:{holder['port']}", f"http://127.0.0.1:{dead}"

    async def stop() -> None:
        await holder["runner"].cleanup()  # type: ignore[attr-defined]

    asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


async def test_the_warc_holds_no_credential(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The request records say ``Authorization: [redacted]``; the secret is nowhere in the file."""
    site, origin, _log, _other = await _sites(serve)
    path = tmp_path / "crawl.warc.gz"
    result = await crawl(origin + "/", auth=CRED, warc=str(path), retries=0)
    assert site.refused == [] and len(result.pages) >= 3
    data = gzip.decompress(path.read_bytes())  # every member
    assert data.count(b"WARC-Type: request") >= 4  # robots.txt, /, /a, /b, /away
    assert data.count(b"Authorization: [redacted]") == data.count(b"WARC-Type: request")
    for secret in (PASSWORD, TOKEN, CRED):
        assert secret.encode() not in data
