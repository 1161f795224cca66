"""Start-up promises, each checked in a fresh interpreter (benchmarks/startup.py times them).

* ``crawler --version``, ``--help`` and a usage error import none of the crawl's modules
  (asyncio, ssl, aiohttp, uvloop, yarl, crawler.config/output/engine ...).
* A crawl of http URLs imports no aiohttp (crawler/http/http1.py fetches) and builds no
  ``ssl.SSLContext``; through aiohttp (``CRAWLER_NO_PLAIN_HTTP=1``) it builds none either:
  aiohttp's two import-time contexts are deferred (crawler/http/tls.py) and the one a request
  needs is built on the first https request, once.
* An https crawl goes through the plain path too (no aiohttp, yarl or multidict imported) and
  builds one context, the crawl's own (crawler/http/tls_context.py), against a server whose
  self-signed certificate the crawl trusts through ``SSL_CERT_FILE``.

The probe counts every ``ssl.SSLContext`` made in the crawler's process by patching
``SSLContext.__new__`` before anything imports the crawler; the modules imported are those in
``sys.modules`` after ``main()`` and not before. No wall-clock time is asserted here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.conftest import ServeApp

ROOT = Path(__file__).resolve().parent.parent

# Runs crawler.cli.main.main(argv) and writes what happened, as JSON, to the file $PROBE_REPORT.
PROBE = r"""
import json, os, sys
before = set(sys.modules)
made = []
if os.environ.get("PROBE_SSL"):
    import ssl
    _new = ssl.SSLContext.__dict__["__new__"]

    def _counting(cls, *args, **kwargs):
        made.append(cls.__name__)
        return _new.__func__(cls, *args, **kwargs)

    ssl.SSLContext.__new__ = staticmethod(_counting)
    if os.environ.get("PROBE_AIOHTTP_FIRST"):
        import aiohttp  # an application that imported aiohttp itself, before the crawler
from crawler.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
tls = sys.modules.get("crawler.http.tls")
report = {
    "code": code,
    "contexts": len(made),
    "new": sorted(set(sys.modules) - before),
    "deferred": getattr(tls, "DEFERRED", None),
    "built": tls.built_contexts() if tls is not None else None,
}
with open(os.environ["PROBE_REPORT"], "w") as fh:
    json.dump(report, fh)
"""

# Not one of these may be imported by --version, --help or a usage error.
HEAVY = (
    "asyncio",
    "ssl",
    "_ssl",
    "aiohttp",
    "uvloop",
    "yarl",
    "multidict",
    "certifi",
    "tomllib",
    "crawler.config",
    "crawler.output.sinks",
    "crawler.output.progress",
    "crawler.core.engine",
    "crawler.http.client",
    "crawler.state",
)


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def probe_sync(tmp_path: Path, *argv: str, **env: str) -> dict[str, Any]:
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PROBE_REPORT": str(report), **env},
    )  # fmt: skip
    assert report.exists(), proc.stderr
    found: dict[str, Any] = json.loads(report.read_text())
    found["stdout"], found["stderr"] = proc.stdout, proc.stderr
    return found


async def probe(tmp_path: Path, *argv: str, **env: str) -> dict[str, Any]:
    """probe_sync, without blocking the event loop that serves the site."""
    report = tmp_path / "report.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROBE, *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PROBE_REPORT": str(report), **env},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert report.exists(), err.decode()
    found: dict[str, Any] = json.loads(report.read_text())
    found["stdout"], found["stderr"] = out.decode(), err.decode()
    return found


# -- the commands that crawl nothing import nothing heavy --


def test_version_imports_nothing_heavy(tmp_path: Path) -> None:
    got = probe_sync(tmp_path, "--version")
    assert got["code"] == 0 and got["stdout"].startswith("crawler "), got["stderr"]
    assert "extractor: " in got["stdout"] and "event loop: " in got["stdout"]
    assert "crawler.cli.main" in got["new"]  # the probe sees the imports
    assert _heavy(got["new"]) == []


def test_help_imports_neither_the_crawl_nor_the_extractor(tmp_path: Path) -> None:
    got = probe_sync(tmp_path, "--help")
    assert got["code"] == 0 and "crawl" in got["stdout"] and "check" in got["stdout"]
    assert _heavy(got["new"]) == []
    assert not [m for m in got["new"] if m.startswith("crawler.extract")]


@pytest.mark.parametrize("argv", [["bogus"], [], ["--version", "--bogus"]], ids=str)
def test_a_usage_error_imports_nothing_heavy(tmp_path: Path, argv: list[str]) -> None:
    got = probe_sync(tmp_path, *argv)
    assert got["code"] == 2, got
    assert _heavy(got["new"]) == []


def test_crawl_help_reads_the_defaults_but_starts_no_event_loop(tmp_path: Path) -> None:
    got = probe_sync(tmp_path, "crawl", "--help")
    assert got["code"] == 0 and "--max-pages" in got["stdout"]
    assert "crawler.config" in got["new"]  # the defaults shown come from CrawlConfig
    assert not [m for m in got["new"] if m.split(".")[0] in ("asyncio", "aiohttp", "ssl")]


# -- TLS: no context for http, one for https --


def _pages() -> web.Application:
    async def handler(request: web.Request) -> web.Response:
        if request.path == "/":
            return web.Response(
                text='<a href="/a">a</a> <a href="/b">b</a>', content_type="text/html"
            )
        if request.path in ("/a", "/b"):
            return web.Response(text="<p>leaf</p>", content_type="text/html")
        raise web.HTTPNotFound()

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app


async def test_an_http_crawl_imports_no_aiohttp_and_builds_no_tls_context(
    serve: ServeApp, tmp_path: Path
) -> None:
    server = await serve(_pages())
    url = str(server.make_url("/"))
    got = await probe(tmp_path, "crawl", url, "-q", PROBE_SSL="1")
    assert got["code"] == 0, got["stderr"]
    assert sorted(got["stdout"].split()) == [url, url + "a", url + "b"]
    assert "crawler.http.http1" in got["new"]  # the plain path fetched ...
    assert not [m for m in got["new"] if m.split(".")[0] == "aiohttp"]  # ... aiohttp not imported
    # ... nor yarl and multidict (aiohttp's URL and headers: the plain path needs neither)
    assert not [m for m in got["new"] if m.split(".")[0] in ("yarl", "multidict")]
    assert got["contexts"] == 0 and got["built"] is None  # ... and no context was ever made
    # --render never (the default): nothing of the renderer, nor Playwright, is imported
    assert not [m for m in got["new"] if m.startswith(_RENDER_MODULES)]


async def test_an_http_audit_imports_no_aiohttp(serve: ServeApp, tmp_path: Path) -> None:
    # the audit (external links off) fetches and probes through the plain path: aiohttp
    # (~0.1 s to import, ~8 MB) is for the sessions that need it (crawler/check/probe.py)
    server = await serve(_pages())
    url = str(server.make_url("/"))
    got = await probe(tmp_path, "audit", url, "-q", "-f", "json")
    assert got["code"] in (0, 1), got["stderr"]
    assert json.loads(got["stdout"])["stats"]["pages"] == 3
    assert "crawler.audit.auditor" in got["new"] and "crawler.http.http1" in got["new"]
    assert not [m for m in got["new"] if m.split(".")[0] == "aiohttp"]
    # nor langcodes, whose tables are for the first hreflang (the pages have none)
    assert not [m for m in got["new"] if m.split(".")[0] == "langcodes"]
    # and it runs on the crawl command's loop: uvloop when installed
    if importlib.util.find_spec("uvloop") is not None:
        assert "uvloop" in got["new"]


_RENDER_MODULES = ("crawler.render", "crawler.core.render", "playwright")


async def test_render_auto_on_static_pages_starts_no_browser_and_imports_no_playwright(
    serve: ServeApp, tmp_path: Path
) -> None:
    pytest.importorskip("playwright")  # (--render auto refuses to start without it)
    server = await serve(_pages())
    url = str(server.make_url("/"))
    got = await probe(tmp_path, "crawl", url, "--render", "auto", "-q")
    assert got["code"] == 0, got["stderr"]
    assert sorted(got["stdout"].split()) == [url, url + "a", url + "b"]
    assert "crawler.core.rendering" in got["new"]  # auto was on ...
    # ... and no page needed a browser: nothing of crawler.render, nor Playwright, imported
    assert not [m for m in got["new"] if m.split(".")[0] == "playwright"]
    assert not [m for m in got["new"] if m.startswith("crawler.render")]


async def test_an_http_crawl_through_aiohttp_builds_no_tls_context(
    serve: ServeApp, tmp_path: Path
) -> None:
    server = await serve(_pages())
    url = str(server.make_url("/"))
    got = await probe(tmp_path, "crawl", url, "-q", PROBE_SSL="1", CRAWLER_NO_PLAIN_HTTP="1")
    assert got["code"] == 0, got["stderr"]
    assert sorted(got["stdout"].split()) == [url, url + "a", url + "b"]
    assert "aiohttp.connector" in got["new"]  # the connector was imported ...
    assert got["deferred"] is True  # ... with its contexts deferred (aiohttp's layout known)
    assert got["contexts"] == 0 and got["built"] == []  # ... and none was ever made


async def test_aiohttp_imported_first_keeps_its_own_contexts(
    serve: ServeApp, tmp_path: Path
) -> None:
    server = await serve(_pages())
    got = await probe(
        tmp_path,
        "crawl",
        str(server.make_url("/")),
        "-q",
        PROBE_SSL="1",
        PROBE_AIOHTTP_FIRST="1",
        CRAWLER_NO_PLAIN_HTTP="1",
    )
    assert got["code"] == 0, got["stderr"]
    assert got["deferred"] is False  # nothing changed: aiohttp built both at its import
    assert got["contexts"] == 2 and sorted(got["built"]) == [
        "_SSL_CONTEXT_UNVERIFIED",
        "_SSL_CONTEXT_VERIFIED",
    ]


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


async def test_an_https_crawl_imports_no_aiohttp_and_builds_one_verified_context(
    certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    cert, key = certificate
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    runner = web.AppRunner(_pages())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls)
    await site.start()
    try:
        port = runner.addresses[0][1]
        url = f"https://127.0.0.1:{port}/"
        got = await probe(tmp_path, "crawl", url, "-q", PROBE_SSL="1", SSL_CERT_FILE=str(cert))
        assert got["code"] == 0, got["stderr"]
        assert sorted(got["stdout"].split()) == [url, url + "a", url + "b"]
        # three pages, robots.txt, keep-alive or not: one context, the crawl's own ...
        assert got["contexts"] == 1
        # ... on the plain path: no aiohttp, yarl or multidict imported (crawler/http/http1.py)
        assert "crawler.http.http1" in got["new"] and "crawler.http.tls_context" in got["new"]
        assert not [m for m in got["new"] if m.split(".")[0] in ("aiohttp", "yarl", "multidict")]
        assert got["built"] is None  # (aiohttp's deferral, crawler.http.tls, never imported)

        # the same site without the certificate trusted: refused, as aiohttp always did
        untrusted = await probe(tmp_path, "crawl", url, "-q", "--retries", "0", PROBE_SSL="1")
        assert untrusted["code"] == 1 and untrusted["stdout"].split() == [url]  # the seed only
    finally:
        await runner.cleanup()
