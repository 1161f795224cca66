"""A run's time limit (``--max-time``) and the checker's breaker for hosts that stop answering.

A real tarpit on 127.0.0.1 (accepts connections, never answers a byte) stands for a hostile
link target; short timeouts keep the tests short. ``crawler check`` with 200 tarpit links ends
in about one ``--timeout`` (not 200 x 5 of them): after ``--host-timeouts`` timeouts in a row
the host's other links are not requested and are reported ``host_unresponsive``, never
broken. ``--max-time`` stops the whole run (crawl or check) cleanly, on time: the crawl's
outputs complete and its summary saying why; the check's report listing what was not checked.
"""

from __future__ import annotations

import asyncio
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from crawler import CrawlConfig
from crawler.core.engine import Crawler
from tests.test_cli import Serve, endless_app, run, serve, site_app  # noqa: F401


class Tarpit:
    """127.0.0.1:<port> accepts every connection and never answers; counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0
        self._held: list[asyncio.StreamWriter] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._held.append(writer)
        try:
            while await reader.read(65536):
                pass  # read the request, answer nothing, ever
        except (ConnectionError, asyncio.CancelledError):
            pass

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{self.port}"

    async def close(self) -> None:
        for writer in self._held:
            writer.close()
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def tarpit() -> AsyncIterator[Tarpit]:
    pit = Tarpit()
    await pit.start()
    yield pit
    await pit.close()


def links_to(base: str, n: int) -> str:
    return "".join(f'<a href="{base}/t/{i}">{i}</a>\n' for i in range(n))


async def test_check_stops_sending_to_a_tarpit_after_a_few_timeouts(
    serve: Serve,  # noqa: F811
    tarpit: Tarpit,
) -> None:
    pit = f"http://127.0.0.1:{tarpit.port}"
    site = await serve(site_app({"/": links_to(pit, 200) + '<a href="/ok">ok</a>', "/ok": "ok"}))
    t0 = time.monotonic()
    done = await run(
        "check", site + "/", "--timeout", "0.5", "--recheck-delay", "0", "--ignore-robots",
        "-f", "json", timeout=120,
    )  # fmt: skip
    took = time.monotonic() - t0
    report = json.loads(done.out)
    # before: 200 links x (HEAD + 2 retries + GET) x 0.5 s, 8 at a time: about 60 s
    assert took < 15, (took, done.err)
    assert tarpit.connections <= 16, tarpit.connections  # a first wave of --per-host 8
    broken = {p["url"]: p for p in report["broken"]}
    skipped = {p["url"]: p for p in report["warnings"] if p["error"] == "host_unresponsive"}
    targets = {f"{pit}/t/{i}" for i in range(200)}
    assert set(broken) | set(skipped) == targets and not set(broken) & set(skipped)
    # the links that really timed out are broken (timeout), the rest not checked, not broken:
    # at most --per-host 8 in flight, and 2 more that took the slots of the first 2 timeouts
    assert 3 <= len(broken) <= 8 + 2 and all(p["error"] == "timeout" for p in broken.values())
    assert all("checked once" in p["detail"] for p in broken.values())
    assert all(f"3 URLs of {pit} timed out in a row" in p["detail"] for p in skipped.values())
    assert report["stats"]["unchecked"] == len(skipped) and not report["stats"]["time_limit"]
    assert done.rc == 1, done.err  # the timeouts are broken links
    assert f"{len(skipped):,} not checked" in done.err


async def test_check_max_time_ends_on_time_and_lists_what_was_not_checked(
    serve: Serve,  # noqa: F811
    tarpit: Tarpit,
) -> None:
    pit = f"http://127.0.0.1:{tarpit.port}"

    home = links_to(pit, 50) + '<a href="/slow">s</a><a href="/ok">ok</a>'
    release = asyncio.Event()  # set at the end (the server's close waits for handlers)

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/slow":  # an in-scope page still in flight at the deadline
            await release.wait()
        body = home if request.path == "/" else "<p>ok"
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    site = await serve(app)
    try:
        await check_max_time(site, pit)
    finally:
        release.set()


async def check_max_time(site: str, pit: str) -> None:
    t0 = time.monotonic()
    done = await run(
        "check", site + "/", "--timeout", "30", "--host-timeouts", "0", "--max-time", "3",
        "--ignore-robots", "-f", "json", timeout=120,
    )  # fmt: skip
    took = time.monotonic() - t0
    assert took < 10, (took, done.err)  # before: no deadline, about 50 x 5 x 30 s / 8
    report = json.loads(done.out)
    assert report["broken"] == []  # nothing it did not finish checking is called broken
    unchecked = {p["url"] for p in report["warnings"] if p["error"] == "not_checked"}
    assert unchecked == {f"{pit}/t/{i}" for i in range(50)} | {site + "/slow"}
    stats = report["stats"]
    assert stats["time_limit"] is True and stats["unchecked"] == 51
    assert stats["ok"] >= 2  # the seed and /ok were checked
    assert done.rc == 0 and "stopped at --max-time" in done.err, done.err
    # the text report says it too, with the list
    done = await run(
        "check", site + "/", "--timeout", "30", "--host-timeouts", "0", "--max-time", "2",
        "--ignore-robots", timeout=120,
    )  # fmt: skip
    assert "stopped at --max-time: 51 URLs not checked" in done.out
    assert f"not_checked  {site}/slow\n" in done.out


async def test_crawl_max_time_stops_cleanly_with_complete_outputs(
    serve: Serve,  # noqa: F811
    tmp_path: Path,
) -> None:
    site = await serve(endless_app(0.2))  # an endless site: only the limit ends it
    out = tmp_path / "pages.jsonl"
    t0 = time.monotonic()
    done = await run("crawl", site + "/", "--max-time", "1.5", "-f", "jsonl", "-o", str(out))
    took = time.monotonic() - t0
    assert done.rc == 0, done.err  # a limit, as --max-pages: not an error
    assert took < 8, took
    assert "crawler: stopped (time limit) in " in done.err, done.err
    records = [json.loads(line) for line in out.read_text().splitlines()]  # every line whole
    assert len(records) >= 5 and all(r["status"] == 200 for r in records)

    # with a state and a sitemap: a valid sitemap of what was done, and the crawl goes on
    state, sitemap = tmp_path / "st", tmp_path / "sitemap.xml"
    common = ["--state", str(state), "-f", "sitemap", "-o", str(sitemap), "--max-time", "1"]
    done = await run("crawl", site + "/", *common)
    assert done.rc == 0 and "stopped (time limit)" in done.err, done.err
    first = len(ET.parse(sitemap).getroot())
    assert first >= 3
    done = await run("crawl", *common)  # resumed: another second of crawling
    assert done.rc == 0 and "stopped (time limit)" in done.err, done.err
    assert len(ET.parse(sitemap).getroot()) > first


async def test_library_crawl_max_time_says_why_it_stopped(serve: Serve) -> None:  # noqa: F811
    site = await serve(endless_app(0.1))
    config = CrawlConfig(seeds=(site + "/",), max_time=1.0)
    t0 = time.monotonic()
    async with Crawler(config) as crawler:
        result = await crawler.run()
    assert time.monotonic() - t0 < 4
    assert result.stats.time_limit and result.stats.cancelled
    assert result.stats.to_dict()["time_limit"] is True and result.stats.pages >= 3


async def test_a_failure_whose_second_look_the_deadline_cut_keeps_its_first_verdict(
    serve: Serve,  # noqa: F811
) -> None:
    from crawler.check import check  # noqa: PLC0415

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/busy":
            return web.Response(status=503, text="busy")
        return web.Response(text='<a href="/busy">b</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    site = await serve(app)
    t0 = time.monotonic()
    report = await check(
        site + "/", ignore_robots=True, retries=0, max_time=2.0, recheck_delay=30.0
    )
    assert time.monotonic() - t0 < 6
    assert report.stats.time_limit and report.stats.rechecked == 0
    (busy,) = report.broken
    assert (busy.url, busy.error) == (site + "/busy", "http_503")
    assert "checked once; --max-time passed before the second look" in busy.detail
