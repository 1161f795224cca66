"""``--format sitemap`` (issue 14): real crawls of a local site, the files checked against the
sitemaps.org schemas (tests/data/sitemap.xsd, tests/data/sitemap-index.xsd) with lxml."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web
from lxml import etree

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.core.results import PageResult
from crawler.output import sitemap
from crawler.output.sinks import SitemapSink, open_sink

DATA = Path(__file__).parent / "data"
NS = {"s": sitemap.NAMESPACE}
ROOT = str(Path(__file__).resolve().parent.parent)


def schema(name: str) -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(DATA / name)))


def locs(path: Path | bytes, *, index: bool = False) -> list[str]:
    """The <loc>s of a sitemap (or index), after checking it against its schema."""
    doc = etree.fromstring(path) if isinstance(path, bytes) else etree.parse(str(path))
    xsd = schema("sitemap-index.xsd" if index else "sitemap.xsd")
    assert xsd.validate(doc), xsd.error_log
    return [e.text or "" for e in doc.iterfind(".//s:loc", NS)]


def site_app(pages: int = 3, delay: float = 0.0) -> web.Application:
    """HTML pages /, /p/0 .. /p/N-1 (and /q?a=1&b=2, XML-special), an image, a 404, a PDF,
    a redirect to a page linked nowhere else, a redirect to a page linked directly too, an
    HTML page answered with 500 after retries, a page answered 200 as text/plain."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if delay:
            await asyncio.sleep(delay)
        path = request.path
        links = [f"/p/{i}" for i in range(pages)]
        links += ["/q?a=1&b=2", "/img.png", "/missing", "/doc.pdf", "/moved", "/again"]
        links += ["/broken", "/plain.txt"]
        if path == "/":
            body = "".join(f'<a href="{h.replace("&", "&amp;")}">x</a>' for h in links)
            return web.Response(text=body, content_type="text/html")
        if path.startswith("/p/") or path in ("/q", "/landing"):
            return web.Response(text='<a href="/">home</a>', content_type="text/html")
        if path == "/img.png":
            return web.Response(body=b"\x89PNG\r\n", content_type="image/png")
        if path == "/doc.pdf":
            return web.Response(body=b"%PDF-1.4", content_type="application/pdf")
        if path == "/plain.txt":
            return web.Response(text="<a href=/>not html</a>", content_type="text/plain")
        if path == "/moved":
            raise web.HTTPMovedPermanently("/landing")
        if path == "/again":
            raise web.HTTPFound("/p/0")
        if path == "/broken":
            return web.Response(status=500, text="<p>oops</p>", content_type="text/html")
        return web.Response(status=404, text="<p>no</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


def expected(origin: str, pages: int = 3) -> set[str]:
    return {
        f"{origin}/",
        *(f"{origin}/p/{i}" for i in range(pages)),
        f"{origin}/q?a=1&b=2",
        f"{origin}/landing",
    }


async def run(origin: str, sink: SitemapSink, **kw: object) -> None:
    config = CrawlConfig(seeds=(origin + "/",), retries=0, **kw)  # type: ignore[arg-type]
    async with Crawler(config, sink=sink) as crawler:
        await crawler.run()


async def test_lists_exactly_the_html_pages_that_answered_200(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = await serve(site_app())
    origin = str(server.make_url("")).rstrip("/")
    out = tmp_path / "sitemap.xml"
    sink = open_sink("sitemap", str(out))
    assert isinstance(sink, SitemapSink)
    await run(origin, sink)
    assert sink.error is None
    listed = locs(out)
    # no 404, 500, image, PDF, text/plain; redirects by their final URL; no duplicate
    # (/again redirects to /p/0, which is linked directly as well)
    assert len(listed) == len(set(listed))
    assert set(listed) == expected(origin)
    assert f"{origin}/moved" not in listed
    # XML-escaped in the file, the URL itself once parsed
    assert b"/q?a=1&amp;b=2</loc>" in out.read_bytes()
    # no side file left without a state
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sitemap.xml"]


async def test_split_into_an_index_past_the_limit(serve, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sitemap, "MAX_URLS", 3)
    server = await serve(site_app(pages=6))
    origin = str(server.make_url("")).rstrip("/")
    out = tmp_path / "sitemap.xml"
    await run(origin, open_sink("sitemap", str(out)))  # type: ignore[arg-type]
    want = expected(origin, pages=6)  # 9 URLs: 3 files of 3
    index = locs(out, index=True)
    assert index == [f"{origin}/sitemap-{i}.xml" for i in (1, 2, 3)]
    listed: list[str] = []
    for i in (1, 2, 3):
        part = locs(tmp_path / f"sitemap-{i}.xml")
        assert 1 <= len(part) <= 3
        listed += part
    assert sorted(listed) == sorted(want)
    # a smaller crawl into the same file: one sitemap again, the old parts removed
    monkeypatch.setattr(sitemap, "MAX_URLS", 50_000)
    await run(origin, open_sink("sitemap", str(out)))  # type: ignore[arg-type]
    assert set(locs(out)) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sitemap.xml"]


def test_byte_limit_splits_too_and_no_file_passes_it(tmp_path: Path) -> None:
    urls = [f"https://example.com/page/{i:04d}?x=" + "y" * 100 for i in range(40)]
    out = tmp_path / "map"  # no .xml: parts are map-1.xml ...
    limit = 2_000
    result = sitemap.write_sitemaps(
        iter(urls), str(out), max_bytes=limit, base="https://cdn.example.org/maps"
    )
    assert result.index and result.urls == 40
    names = locs(out, index=True)
    assert names[0] == "https://cdn.example.org/maps/map-1.xml"
    listed = []
    for n in range(1, len(names) + 1):
        part = tmp_path / f"map-{n}.xml"
        assert part.stat().st_size <= limit
        listed += locs(part)
    assert listed == urls
    assert len(names) == len(list(tmp_path.glob("map-*.xml")))


def test_only_our_own_stale_parts_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "site0.xml"
    theirs = tmp_path / "site0-1.xml"
    theirs.write_bytes(b"someone else's file")
    urls = [f"https://example.com/{i:03d}" for i in range(7)]
    sitemap.write_sitemaps(urls[:1], str(out))  # a single sitemap: site0-1.xml is not ours
    assert theirs.read_bytes() == b"someone else's file"
    result = sitemap.write_sitemaps(urls, str(out), max_urls=2)  # an index and 4 parts
    assert result.files == [str(out), *(str(tmp_path / f"site0-{i}.xml") for i in (1, 2, 3, 4))]
    sitemap.write_sitemaps(urls, str(out), max_urls=3)  # 3 parts: site0-4.xml goes
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "site0-1.xml", "site0-2.xml", "site0-3.xml", "site0.xml",
    ]  # fmt: skip
    assert [u for i in (1, 2, 3) for u in locs(tmp_path / f"site0-{i}.xml")] == urls


def test_loc_is_ascii_escaped_and_bounded() -> None:
    assert sitemap.loc("https://example.com/a?b=1&c='2'") == (
        "https://example.com/a?b=1&amp;c=&apos;2&apos;"
    )
    assert sitemap.loc("https://example.com/caf\u00e9 x") == "https://example.com/caf%C3%A9%20x"
    assert sitemap.loc("https://example.com/%41") == "https://example.com/%41"
    assert sitemap.loc("http://a/") is None  # under the schema's 12 characters
    assert sitemap.loc("https://example.com/" + "a" * 2100) is None
    out = io.BytesIO()
    result = sitemap.write_sitemaps(
        ["https://example.com/" + "a" * 2100, "https://example.com/ok"], None, stream=out
    )
    assert (result.urls, result.skipped) == (1, 1)
    assert locs(out.getvalue()) == ["https://example.com/ok"]


def page(url: str, final: str | None = None) -> PageResult:
    return PageResult(url, 0, final_url=final or url, status=200, content_type="text/html")


def test_stdout_holds_one_sitemap_and_refuses_an_index(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    out = io.BytesIO()
    sink = open_sink("sitemap", stream=out)
    for i in range(3):
        sink.page(page(f"https://example.com/{i:03d}"))
    sink.close()
    assert sink.error is None
    assert len(locs(out.getvalue())) == 3
    monkeypatch.setattr(sitemap, "MAX_URLS", 2)
    out = io.BytesIO()
    sink = open_sink("sitemap", stream=out)
    for i in range(3):
        sink.page(page(f"https://example.com/{i:03d}"))
    sink.close()
    assert sink.error is not None and "--output" in str(sink.error.strerror)
    assert out.getvalue() == b""  # nothing half-written


def test_a_url_reported_twice_is_listed_once(tmp_path: Path) -> None:
    """Two redirects to one page, a page fetched again after a kill: one <url> each."""
    out = tmp_path / "sitemap.xml"
    sink = open_sink("sitemap", str(out))
    sink.page(page("https://example.com/a"))
    sink.page(page("https://example.com/old", final="https://example.com/b"))
    sink.page(page("https://example.com/older", final="https://example.com/b"))
    sink.page(page("https://example.com/a"))
    not_html = page("https://example.com/c.png")
    not_html.content_type = "image/png"
    sink.page(not_html)
    cut = page("https://example.com/huge")  # too_large: it answered 200 all the same
    cut.error, cut.truncated = "too_large", True
    sink.page(cut)
    sink.close()
    assert locs(out) == [
        "https://example.com/a",
        "https://example.com/b",
        "https://example.com/huge",
    ]


def test_side_file_dedupes_in_order_on_disk(tmp_path: Path) -> None:
    lines = ["https://e.com/b", "https://e.com/a", "https://e.com/b", "https://e.com/c"] * 3
    assert list(sitemap.unique(lines)) == ["https://e.com/b", "https://e.com/a", "https://e.com/c"]


async def test_resume_keeps_the_first_runs_urls(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = await serve(site_app(pages=8))
    origin = str(server.make_url("")).rstrip("/")
    out = tmp_path / "sitemap.xml"
    state = str(tmp_path / "state")
    await run(origin, open_sink("sitemap", str(out), resume=False), state=state, max_pages=4)  # type: ignore[arg-type]
    first = set(locs(out))
    assert 1 <= len(first) <= 4
    await run(origin, open_sink("sitemap", str(out), resume=True), state=state, max_pages=100)  # type: ignore[arg-type]
    listed = locs(out)
    assert len(listed) == len(set(listed))
    assert first <= set(listed)
    assert set(listed) == expected(origin, pages=8)
    assert (tmp_path / "sitemap.xml.urls").exists()  # kept for the next run


async def test_sigkill_then_resume_loses_no_page(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real ``crawler crawl --state DIR --format sitemap`` killed mid-crawl (it never wrote
    its sitemap), then resumed: the sitemap holds every page, the killed run's too."""
    served: list[str] = []
    app = site_app(pages=30, delay=0.05)

    @web.middleware
    async def count(request: web.Request, handler):  # type: ignore[no-untyped-def]
        served.append(request.path_qs)
        return await handler(request)

    app.middlewares.append(count)
    server = await serve(app)
    origin = str(server.make_url("")).rstrip("/")
    out = tmp_path / "sitemap.xml"
    cmd = [
        sys.executable, "-m", "crawler", "crawl", origin + "/", "--state", str(tmp_path / "st"),
        "--format", "sitemap", "-o", str(out), "--concurrency", "2", "--retries", "0", "-q",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, stderr=subprocess.PIPE)
    for _ in range(400):
        if len(served) >= 12:
            break
        await asyncio.sleep(0.025)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    side = tmp_path / "sitemap.xml.urls"
    assert side.stat().st_size > 0  # the killed run's pages are on disk
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, stderr=subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    listed = locs(out)
    assert len(listed) == len(set(listed))
    assert set(listed) == expected(origin, pages=30)


def test_a_crawl_that_never_starts_leaves_the_sitemap_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "sitemap.xml"
    out.write_bytes(b"earlier")
    sink = open_sink("sitemap", str(out), resume=True)
    sink.close()  # the engine never called start(): the state was refused
    assert out.read_bytes() == b"earlier"


def test_unwritable_output_fails_at_open(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        open_sink("sitemap", str(tmp_path / "no" / "such" / "sitemap.xml"))


async def test_sigkill_without_state_leaves_no_partial_sitemap(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real ``crawler crawl --format sitemap -o FILE`` (no state) SIGKILLed mid-crawl
    (issue 25): FILE is not created empty at the start, so the kill leaves no file that is
    not XML; an earlier whole sitemap at FILE is left as it was; a run that ends writes it."""
    served: list[str] = []
    app = site_app(pages=30, delay=0.05)

    @web.middleware
    async def count(request: web.Request, handler):  # type: ignore[no-untyped-def]
        served.append(request.path_qs)
        return await handler(request)

    app.middlewares.append(count)
    server = await serve(app)
    origin = str(server.make_url("")).rstrip("/")
    out = tmp_path / "sitemap.xml"
    cmd = [
        sys.executable, "-m", "crawler", "crawl", origin + "/", "--format", "sitemap",
        "-o", str(out), "--concurrency", "2", "--retries", "0", "-q",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": ROOT}

    async def killed_run() -> None:
        served.clear()
        proc = await asyncio.create_subprocess_exec(*cmd, env=env, stderr=subprocess.PIPE)
        for _ in range(400):
            if len(served) >= 8:
                break
            await asyncio.sleep(0.025)
        assert len(served) >= 8
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        assert proc.returncode == -signal.SIGKILL

    await killed_run()
    assert not out.exists()  # not a 0-byte file that is not XML
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, stderr=subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    whole = out.read_bytes()
    assert set(locs(whole)) == expected(origin, pages=30)
    await killed_run()
    assert out.read_bytes() == whole  # the earlier sitemap is kept whole, not truncated
