"""The command line on a redis:// state (issue 11): crawl, join with no URL (waiting for a
crawl that is not there yet), the crawl-wide politeness refused on a join, ``crawler status``'s
cluster view, and an unreachable Redis (exit 2: the URL, its password hidden, and the reason).
Against a real redis-server (tests/redisserver.py)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from aiohttp import web

from tests.conftest import ServeApp
from tests.redisserver import RedisServer, redis_server
from tests.test_cli import CRAWLER, IN_SCOPE, SITE, no_traceback, run, site_app

__all__ = ["redis_server"]  # the fixture, imported for pytest

PAGES = len(IN_SCOPE)  # 6: five ok, /missing 404


@pytest.fixture
async def site(serve: ServeApp) -> str:
    server = await serve(site_app(SITE))
    return f"http://127.0.0.1:{server.port}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_unreachable_redis_is_exit_2_naming_the_url_without_its_password() -> None:
    url = f"redis://:hunter2-pw@127.0.0.1:{free_port()}/0"
    shown = url.replace(":hunter2-pw@", ":***@")
    for args in (("crawl", "http://127.0.0.1:9/", "--state", url), ("status", "--state", url)):
        done = await run(*args, timeout=30)
        no_traceback(done)
        assert done.rc == 2, done.err
        assert shown in done.err and "refused" in done.err.lower(), done.err
        assert "hunter2" not in done.err + done.out


async def test_crawl_join_and_the_cluster_status(site: str, redis_server: RedisServer) -> None:
    url = redis_server.url
    state = ("--state", url, "--name", "cl-1")
    done = await run("crawl", site + "/", *state, "-f", "jsonl", "-q", "--per-host", "2")
    no_traceback(done)
    assert done.rc == 0, done.err
    assert len(done.out.splitlines()) == PAGES

    # the cluster view, for people and for scripts
    text = await run("status", *state)
    assert text.rc == 0, text.err
    assert text.out.startswith(f"state:     {url} name=cl-1 (no worker alive;")
    assert "queued:    0\n" in text.out and f"done:      {PAGES} (5 ok, 1 failed" in text.out
    assert "pages/s over the last minute (or since the crawl started, if later)\n" in text.out
    assert "per_host = 2" in text.out
    data = json.loads((await run("status", *state, "-f", "json")).out)
    assert (data["done"], data["queued"], data["in_flight"], data["ok"]) == (PAGES, 0, 0, 5)
    assert data["name"] == "cl-1" and data["workers"] == 0
    assert data["pages_per_second"] > 0 and data["redis_memory"] > 0
    assert data["seeds"] == [site + "/"]

    # another name in the same database is another crawl: none there
    other = await run("status", "--state", url, "--name", "cl-2")
    assert other.rc == 2 and "no crawl named 'cl-2'" in other.err, other.err

    # politeness holds across the workers: a joining worker cannot change it
    done = await run("crawl", *state, "--per-host", "3")
    assert done.rc == 2
    assert (
        "--per-host: this crawl was started with 2, this run gives 3; it cannot change on"
        " resume (with a shared state the limit holds across all workers" in done.err
    ), done.err
    # joining with no URL: the stored crawl (nothing left), exit 0 by itself
    done = await run("crawl", *state, "-f", "jsonl")
    no_traceback(done)
    assert done.rc == 0, done.err
    assert done.out == ""
    assert f"crawler: joined: {PAGES} pages done before this worker joined; it fetched 0\n" in (
        done.err
    )


async def test_a_worker_with_no_url_waits_for_the_crawl_then_joins(
    site: str, redis_server: RedisServer
) -> None:
    state = ("--state", redis_server.url, "--name", "late")
    worker = await asyncio.create_subprocess_exec(
        *CRAWLER, "crawl", *state, "-f", "jsonl",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert worker.stderr is not None
        line = await asyncio.wait_for(worker.stderr.readline(), 30)
        assert line.decode() == (
            f"crawler: no crawl late at {redis_server.url} yet; waiting for one to start"
            " (Ctrl-C to stop)\n"
        )
        seeder = await run("crawl", site + "/", *state, "-f", "jsonl", "-q")
        no_traceback(seeder)
        assert seeder.rc == 0, seeder.err
        out, err = await asyncio.wait_for(worker.communicate(), 60)
        assert worker.returncode == 0, err.decode()
        fetched = [json.loads(x)["url"] for x in (seeder.out + out.decode()).splitlines()]
        assert sorted(set(fetched)) == sorted(site + p for p in IN_SCOPE)
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()


async def test_no_url_and_no_crawl_in_a_directory_is_still_an_error(tmp_path: object) -> None:
    done = await run("crawl", "--state", str(tmp_path) + "/none")
    assert done.rc == 2 and "holds no crawl yet" in done.err


def slow_page_app(status: int, delay: float) -> web.Application:
    """One page, no links, answered with ``status`` after ``delay`` seconds."""

    async def handler(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            raise web.HTTPNotFound()
        await asyncio.sleep(delay)
        return web.Response(status=status, text="<p>the only page</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app


@pytest.mark.parametrize(("status", "rc"), [(200, 0), (404, 1)])
async def test_a_worker_that_fetched_nothing_exits_as_the_crawl_went(
    serve: ServeApp, redis_server: RedisServer, status: int, rc: int
) -> None:
    """A worker that joins while another holds the crawl's only page fetches nothing itself:
    it exits 0 if the crawl has a page done without error, 1 if its pages all failed (the
    seeder's code), not 1 for having had nothing to do."""
    server = await serve(slow_page_app(status, delay=2.0))
    state = ("--state", redis_server.url, "--name", f"idle-{status}")
    worker = await asyncio.create_subprocess_exec(
        *CRAWLER, "crawl", *state, "-f", "jsonl",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert worker.stderr is not None
        await asyncio.wait_for(worker.stderr.readline(), 30)  # "waiting for one to start"
        seeder = await run(
            "crawl", f"http://127.0.0.1:{server.port}/", *state, "-f", "jsonl", "-q",
            "--per-host", "1", "--retries", "0",
        )  # fmt: skip
        no_traceback(seeder)
        assert seeder.rc == rc, seeder.err
        out, err = await asyncio.wait_for(worker.communicate(), 60)
        assert out == b"", "the joiner fetched the page: the test did not make it idle"
        assert "it fetched 0" in err.decode(), err.decode()
        assert worker.returncode == rc, err.decode()
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
