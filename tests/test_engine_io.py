"""What the engine opens besides the state (the metrics server, the WARC writer, the fetcher
with its cookie jar) is closed on every path: a normal end, a cancelled run, an open step
that fails half-way; and a redirect goes through the fetcher hop by hop, so that the
fetcher's per-origin decisions (Basic auth) are made for each hop.

Real aiohttp servers on 127.0.0.1, real files, warcio to read the archives back.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawler.config import ConfigError, CrawlConfig
from crawler.core.engine import Crawler
from crawler.core.ledger import Ledger
from crawler.state.memory import MemoryState


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


def cookie_site(n: int, delay: float) -> tuple[web.Application, list[str]]:
    """Pages 0..n-1, all linked from page 0; page 0 sets a session cookie."""
    seen: list[str] = []

    async def page(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        seen.append(request.path)
        await asyncio.sleep(delay if i else 0)
        links = "".join(f'<a href="{j}.html">x</a>' for j in range(1, n)) if i == 0 else ""
        res = web.Response(text=links, content_type="text/html")
        if i == 0:
            res.set_cookie("session", "s3cr3t-cookie", path="/")
        return res

    app = web.Application()
    app.router.add_get("/p/{i:\\d+}.html", page)
    return app, seen


def open_fds_to(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path`` (Linux /proc)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                n += 1
        except OSError:
            pass
    return n


def read_warc(path: Path) -> list[str]:
    """The record types of ``path``, digests checked (raises on a cut or bad record)."""
    with open(path, "rb") as fh:
        return [rec.rec_type for rec in ArchiveIterator(fh, check_digests="raise")]


async def test_a_cancelled_run_closes_archive_cookies_and_metrics(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, seen = cookie_site(40, delay=0.2)
    server = await serve(app)
    port = free_port()
    warc_path, jar_path = tmp_path / "c.warc.gz", tmp_path / "cookies.txt"
    cfg = CrawlConfig(
        seeds=(str(server.make_url("/p/0.html")),),
        ignore_robots=True,
        concurrency=4,
        warc=str(warc_path),
        save_cookies=str(jar_path),
        metrics_port=port,
    )
    crawler = Crawler(cfg)
    task = asyncio.ensure_future(crawler.run())
    while len(seen) < 6:
        await asyncio.sleep(0.01)
    assert await listening(port)
    task.cancel()  # Ctrl-C in the CLI cancels the task that runs the crawl
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(seen) < 40  # stopped mid-crawl, pages in flight cut
    assert not await listening(port)  # the metrics server is stopped
    assert open_fds_to(warc_path) == 0  # the WARC file is closed
    assert "s3cr3t-cookie" in jar_path.read_text()  # the jar was saved at close
    types = read_warc(warc_path)  # whole records only, digests right
    assert types[0] == "warcinfo" and types.count("response") >= 2
    assert types.count("response") == types.count("request")


async def test_a_normal_end_closes_them_too(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, seen = cookie_site(5, delay=0.0)
    server = await serve(app)
    port = free_port()
    warc_path, jar_path = tmp_path / "c.warc.gz", tmp_path / "cookies.txt"
    cfg = CrawlConfig(
        seeds=(str(server.make_url("/p/0.html")),),
        ignore_robots=True,
        warc=str(warc_path),
        save_cookies=str(jar_path),
        metrics_port=port,
    )
    crawler = Crawler(cfg)
    result = await crawler.run()
    assert result.stats.pages == 5 and not result.stats.cancelled
    assert not await listening(port)
    assert crawler.archive_error is None and open_fds_to(warc_path) == 0
    assert "s3cr3t-cookie" in jar_path.read_text()
    assert read_warc(warc_path).count("response") == 5


async def test_an_open_step_that_fails_closes_what_it_opened(tmp_path: Path) -> None:
    # The metrics server is up when the WARC file cannot be opened: it must not stay up,
    # and the state must be closed (a memory state can be opened again only then).
    port = free_port()
    state = MemoryState()
    cfg = CrawlConfig(
        seeds=("http://127.0.0.1:9/",),
        warc=str(tmp_path / "no" / "such" / "dir" / "c.warc.gz"),
        metrics_port=port,
    )
    with pytest.raises(OSError):
        async with Crawler(cfg, state=state):
            pass
    assert not await listening(port)
    await state.open(per_host=1, delay=0.0, max_pages_per_host=0)  # closed: opens again
    await state.close()


async def test_a_metrics_port_in_use_is_a_config_error_and_closes_the_state() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        state = MemoryState()
        cfg = CrawlConfig(seeds=("http://127.0.0.1:9/",), metrics_port=port)
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}"):
            await Crawler(cfg, state=state).run()
        await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
        await state.close()


async def test_a_redirect_is_fetched_hop_by_hop_with_auth_per_origin(serve) -> None:  # type: ignore[no-untyped-def]
    # Origin A (Basic auth in origin_auth) redirects to origin B (in scope: a seed's host,
    # no credentials): each hop is its own fetch, so B never sees A's Authorization.
    got: dict[str, list[str | None]] = {"a": [], "b": []}

    def app(name: str, routes: dict[str, tuple[int, str]]) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            got[name].append(request.headers.get("Authorization"))
            status, value = routes.get(request.path, (200, "<p>end</p>"))
            if status == 200:
                return web.Response(text=value, content_type="text/html")
            return web.Response(status=status, headers={"Location": value})

        application = web.Application()
        application.router.add_get("/{tail:.*}", handle)
        return application

    b_server = await serve(app("b", {}))
    b_url = str(b_server.make_url("/landing"))
    a_routes = {
        "/start": (200, '<a href="/hop">x</a>'),
        "/hop": (302, "/hop2"),
        "/hop2": (301, b_url),
    }
    a_server = await serve(app("a", a_routes))
    a_origin = str(a_server.make_url("")).rstrip("/")
    cfg = CrawlConfig(
        seeds=(a_origin + "/start", str(b_server.make_url("/"))),
        ignore_robots=True,
        origin_auth={a_origin: "alice:pw-of-a"},
    )
    crawler = Crawler(cfg)
    fetched: list[str] = []
    async with crawler:
        assert crawler._fetcher is not None
        real = crawler._fetcher.fetch

        async def spy(url: str, *args, **kwargs):  # type: ignore[no-untyped-def]
            fetched.append(url)
            return await real(url, *args, **kwargs)

        crawler._fetcher.fetch = spy  # type: ignore[method-assign]
        result = await crawler.run()
    hop = next(p for p in result.pages if p.url.endswith("/hop"))
    assert hop.redirects == [a_origin + "/hop2", b_url] and hop.status == 200
    assert [u for u in fetched if u.startswith(a_origin)] == [
        a_origin + "/start",
        a_origin + "/hop",
        a_origin + "/hop2",
    ]
    assert b_url in fetched
    assert got["a"] and all(h is not None and h.startswith("Basic ") for h in got["a"])
    assert got["b"] and all(h is None for h in got["b"])


@pytest.mark.parametrize("shared", [False, True])
async def test_a_page_task_that_crashes_does_not_hold_the_crawl(
    serve,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shared: bool,
) -> None:
    # A bug that escapes the page job's own guard (here: handing a page on) kills its task
    # before the lease is completed. The lease must end anyway (failed, "internal"), or the
    # crawl would wait for it forever; the WARC file is still closed whole.
    from tests.test_engine_shared import SharedMemory  # noqa: PLC0415

    app, _ = cookie_site(6, delay=0.0)
    server = await serve(app)
    real_finish = Ledger.finish

    async def finish(self, page, *, counted=True):  # type: ignore[no-untyped-def]
        if page.url.endswith("/3.html"):
            raise RuntimeError("a bug")
        await real_finish(self, page, counted=counted)

    monkeypatch.setattr(Ledger, "finish", finish)
    inner = MemoryState()
    state = SharedMemory(inner, idle_grace=0.3) if shared else inner
    warc_path = tmp_path / "c.warc.gz"
    cfg = CrawlConfig(
        seeds=(str(server.make_url("/p/0.html")),), ignore_robots=True, warc=str(warc_path)
    )
    crawler = Crawler(cfg, state=state)  # type: ignore[arg-type]
    result = await asyncio.wait_for(crawler.run(), 10)
    assert not result.stats.cancelled
    counts = await inner.counts()
    assert (counts.queued, counts.leased, counts.done) == (0, 0, 6)
    assert counts.failed == {"internal": 1}
    assert read_warc(warc_path).count("response") == 6 and open_fds_to(warc_path) == 0


async def test_a_cookie_jar_that_cannot_be_saved_is_told(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The jar's directory disappears during the crawl: the crawl still ends and closes
    # everything; Crawler.cookies_error says what failed (the CLI reports it).
    app, seen = cookie_site(3, delay=0.0)
    server = await serve(app)
    jar_dir = tmp_path / "jar"
    jar_dir.mkdir()
    cfg = CrawlConfig(
        seeds=(str(server.make_url("/p/0.html")),),
        ignore_robots=True,
        save_cookies=str(jar_dir / "cookies.txt"),
    )
    crawler = Crawler(cfg, on_page=lambda page: jar_dir.exists() and jar_dir.rmdir())
    result = await crawler.run()
    assert result.stats.pages == 3
    error = crawler.cookies_error
    assert error is not None and "--save-cookies" in str(error)
    assert "s3cr3t-cookie" not in str(error)


async def test_no_cookies_error_when_the_jar_is_saved(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, _ = cookie_site(2, delay=0.0)
    server = await serve(app)
    cfg = CrawlConfig(
        seeds=(str(server.make_url("/p/0.html")),),
        ignore_robots=True,
        save_cookies=str(tmp_path / "cookies.txt"),
    )
    crawler = Crawler(cfg)
    await crawler.run()
    assert crawler.cookies_error is None and (tmp_path / "cookies.txt").exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
async def test_a_warc_file_that_cannot_be_written_stops_the_crawl(serve) -> None:  # type: ignore[no-untyped-def]
    # /dev/full: every write fails with ENOSPC, as on a full disk. An archive that silently
    # stopped archiving would be worse than a stopped crawl.
    app, seen = cookie_site(30, delay=0.05)
    server = await serve(app)
    cfg = CrawlConfig(
        seeds=(str(server.make_url("/p/0.html")),), ignore_robots=True, warc="/dev/full"
    )
    crawler = Crawler(cfg)
    result = await asyncio.wait_for(crawler.run(), 20)
    assert result.stats.cancelled and len(seen) < 30
    error = crawler.archive_error
    assert isinstance(error, OSError) and error.errno == errno.ENOSPC
