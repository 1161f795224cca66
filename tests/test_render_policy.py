"""The renderer's pieces that need no browser: the request policy, options, a missing browser.

These run in the default test run (no Chromium, no Playwright needed).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crawler.render import Renderer, RenderOptions, RenderUnavailable
from crawler.render.launch import find_chromium
from crawler.render.policy import Verdict, decide, document_headers

ROOT = Path(__file__).resolve().parent.parent
PAGE = "https://www.example.com/app/"


@pytest.mark.parametrize(
    ("url", "kind", "verdict"),
    [
        # never fetched: they cannot add a link
        ("https://www.example.com/a.png", "image", Verdict.BLOCK),
        ("https://www.example.com/a.css", "stylesheet", Verdict.BLOCK),
        ("https://www.example.com/a.woff2", "font", Verdict.BLOCK),
        ("https://www.example.com/a.mp4", "media", Verdict.BLOCK),
        # scripts from anywhere (CDNs), through the gate
        ("https://www.example.com/app.js", "script", Verdict.GATE),
        ("https://cdn.example.net/lib.js", "script", Verdict.GATE),
        # XHR/fetch from the page's own site (its registrable domain) only
        ("https://www.example.com/api", "fetch", Verdict.GATE),
        ("https://api.example.com/v1", "xhr", Verdict.GATE),
        ("http://api.example.com/v1", "fetch", Verdict.GATE),
        ("https://tracker.example.net/c", "fetch", Verdict.BLOCK),
        ("https://www.example.com/events", "eventsource", Verdict.GATE),
        ("https://evil.example.org/events", "eventsource", Verdict.BLOCK),
        # documents other than the page: navigation away, frames, reloads, popups
        ("https://www.example.com/app/", "document", Verdict.ABORT_NAVIGATION),
        ("https://elsewhere.example.org/", "document", Verdict.ABORT_NAVIGATION),
        # everything else
        ("https://www.example.com/ping", "ping", Verdict.BLOCK),
        ("https://www.example.com/manifest.json", "manifest", Verdict.BLOCK),
        ("wss://www.example.com/socket", "websocket", Verdict.BLOCK),
        ("https://www.example.com/x", "other", Verdict.BLOCK),
        ("ftp://www.example.com/x.js", "script", Verdict.BLOCK),
    ],
)
def test_what_the_browser_may_fetch(url: str, kind: str, verdict: Verdict) -> None:
    assert decide(url, kind, PAGE) is verdict


def test_ip_hosts_are_their_own_site() -> None:
    assert decide("http://127.0.0.1:8000/api", "fetch", "http://127.0.0.1:8000/") is Verdict.GATE
    assert decide("http://127.0.0.2:8000/api", "fetch", "http://127.0.0.1:8000/") is Verdict.BLOCK


def test_the_document_is_fulfilled_with_the_headers_that_still_hold() -> None:
    headers = document_headers(
        {
            "Content-Type": "text/html; charset=windows-1252",
            "Content-Encoding": "br",  # the crawl hands over the decoded body
            "Content-Length": "123",
            "Set-Cookie": "a=1",
            "Content-Security-Policy": "script-src 'self'",
            "Location": "/elsewhere",
        }
    )
    assert headers == {
        "content-type": "text/html; charset=windows-1252",
        "content-security-policy": "script-src 'self'",
    }
    assert document_headers({})["content-type"] == "text/html"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("concurrency", 0, "concurrency: must be at least 1"),
        ("timeout", 0, "timeout: must be more than 0"),
        ("quiet", -0.1, "quiet: must be 0 seconds or more"),
        ("idle", -1, "idle: must be 0 seconds or more"),
        ("recycle_after", 0, "recycle_after: must be at least 1"),
    ],
)
def test_bad_options_name_the_field(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RenderOptions(**{field: value})  # type: ignore[arg-type]


def test_a_missing_chromium_names_the_path_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(RenderUnavailable, match=r"/nope/chromium.*apt-get install chromium"):
        find_chromium("/nope/chromium")
    monkeypatch.setenv("CRAWLER_CHROMIUM", str(tmp_path / "env-chromium"))
    fake = tmp_path / "env-chromium"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_chromium(None) == str(fake)  # $CRAWLER_CHROMIUM first


async def test_render_without_a_browser_raises_before_starting_anything(tmp_path: Path) -> None:
    class Gate:
        async def allow(self, url: str, resource_type: str, page_url: str) -> bool:
            return True

        def release(self, url: str) -> None:
            pass

        def headers_for(self, url: str) -> dict[str, str]:
            return {}

    renderer = Renderer(RenderOptions(executable=str(tmp_path / "none")), Gate())
    with pytest.raises(RenderUnavailable, match="none"):
        await renderer.render("http://127.0.0.1:9/", b"<a href=/x>", {})
    await renderer.close()


def test_importing_the_package_imports_no_playwright() -> None:
    # --render never must cost nothing: the contract's types come without Playwright.
    code = (
        "import sys, crawler.render; "
        "sys.exit(any(m.split('.')[0] in ('playwright', 'greenlet') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_a_crawled_hosts_xhr_is_asked_of_the_gate() -> None:
    """Another site's XHR/fetch go to the gate when the gate says the crawl crawls its host
    (a second seed's host, a subdomain the scope admits); images and the like stay blocked
    whatever the host."""
    page = "http://127.0.0.1:8000/"
    api = "http://127.0.0.2:8000/api"
    assert decide(api, "fetch", page, crawled=True) is Verdict.GATE
    assert decide(api, "xhr", page, crawled=True) is Verdict.GATE
    assert decide(api, "image", page, crawled=True) is Verdict.BLOCK
    assert decide(api, "websocket", page, crawled=True) is Verdict.BLOCK
