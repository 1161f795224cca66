"""What a worker reads from Redis is not trusted (issue 27, item 3).

Anyone who can write to Redis can write under a crawl's keys. Against a real redis-server
(tests/redisserver.py) and real sites on loopback addresses (127.0.0.2 stands for another host):

* a URL pushed into a queue is checked again before it is fetched: out of the crawl's scope
  (another host, or a URL spelled so that the host another parser reads is another) it is
  finished as ``out_of_scope`` and the other host sees no request; a URL robots.txt disallows,
  pushed into the queue of an origin whose robots.txt allows everything, is judged by its own
  origin's robots.txt and not fetched;
* a key of the wrong type, settings that are not JSON, a counter that is not a number, a value
  of tens of megabytes, a queued request that cannot be read: ``crawler crawl`` and ``crawler
  status`` exit 2 naming the key, without a traceback (and the huge value is refused inside
  Redis, never sent whole);
* ``crawler status`` shows control characters read from Redis or from a state directory
  escaped (ESC, BEL, U+009B), never raw.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler.state._redis_owner import pack_value, shard_of
from crawler.state._redis_scripts import DEFAULT_SHARDS, shard_prefix
from tests.conftest import ServeApp
from tests.redisserver import RedisServer, redis_server
from tests.test_cli import no_traceback, run

__all__ = ["redis_server"]  # the fixture, imported for pytest

NAME = "trust"
P = f"crawler:{{{NAME}}}:"


def _site(hits: list[str], robots: str = "") -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        hits.append(request.path_qs)
        if request.path == "/robots.txt":
            return web.Response(text=robots)
        return web.Response(text="<p>a page</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


@pytest.fixture
async def other_host() -> AsyncIterator[tuple[str, list[str]]]:
    """A site on 127.0.0.2, out of every crawl's scope here: it logs what it is asked."""
    hits: list[str] = []
    server = TestServer(_site(hits), host="127.0.0.2", port=0)
    await server.start_server()
    try:
        yield f"http://127.0.0.2:{server.port}", hits
    finally:
        await server.close()


def _client(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url)


def _push(r: redis.Redis, origin: str, url: str, depth: int = 1) -> str:
    """Queue ``url`` under ``origin`` as the put script would (crawler/state/_redis_scripts.py:
    a field of the origin's shard's open requests ``S p``), as anyone who can write to Redis
    can. Returns the hash's key."""
    global _SERIAL
    _SERIAL += 1
    shard = shard_of(origin, DEFAULT_SHARDS)
    key = shard_prefix(NAME, shard) + "p"
    value = pack_value(0, 0.0, depth, origin, f"0\t\t{url}")
    pipe = r.pipeline(transaction=True)
    pipe.sadd(f"{P}used", shard)
    pipe.hset(key, str(_SERIAL), value.encode())  # (a shard's open requests: its HLEN)
    pipe.execute()
    return key


def _sums(r: redis.Redis) -> dict[bytes, int]:
    """The crawl's counts: ``P c`` (layout 5 on one server) and every shard's ``S c``
    summed, and its open requests (``q``, requests ever queued, left out)."""
    out: dict[bytes, int] = {b"queued": 0}
    keys = [f"{P}c", *r.scan_iter(match=f"crawler:{{{NAME}:s*}}:c")]
    for key in keys:
        for field, n in r.hgetall(key).items():
            out[field] = out.get(field, 0) + int(n)
    out.pop(b"q", None)
    for key in r.scan_iter(match=f"crawler:{{{NAME}:s*}}:p"):
        out[b"queued"] += r.hlen(key)
    return out


def _a_counts_key(r: redis.Redis) -> str:
    """The hash the crawl's counts are read from: ``P c`` (layout 5 on one server), else the
    ``S c`` of a shard the crawl used."""
    if r.exists(f"{P}c"):
        return f"{P}c"
    shard = int(sorted(r.smembers(f"{P}used"))[0])
    return shard_prefix(NAME, shard) + "c"


_SERIAL = 1000


async def _crawled(site: str, server: RedisServer, *more: str) -> None:
    """A real crawl of ``site`` (and ``more`` seeds) kept in Redis, run to its end."""
    done = await run("crawl", site + "/", *more, "--state", server.url, "--name", NAME, "-q")
    no_traceback(done)
    assert done.rc == 0, done.err


async def test_a_url_pushed_into_a_queue_is_checked_again_before_it_is_fetched(
    serve: ServeApp, redis_server: RedisServer, other_host: tuple[str, list[str]]
) -> None:
    hits: list[str] = []
    robots = "User-agent: *\nDisallow: /private"
    a = f"http://127.0.0.1:{(await serve(_site(hits, robots))).port}"
    b_hits: list[str] = []
    b = f"http://127.0.0.1:{(await serve(_site(b_hits))).port}"  # robots.txt allows all
    await _crawled(a, redis_server, b + "/")
    assert sorted(hits) == ["/", "/robots.txt"] and sorted(b_hits) == ["/", "/robots.txt"]
    outside, outside_hits = other_host
    r = _client(redis_server)
    pushed = [
        (a, outside + "/secret"),  # another host, in an origin of the crawl's queue
        (a, f"{outside}?@{a[7:]}/x"),  # its origin text reads as A's, its host is 127.0.0.2
        (a, f"http://u:p@{outside[7:]}/userinfo"),
        (b, a + "/private/x"),  # A's disallowed URL in B's queue: B's robots.txt allows all
    ]
    for origin, url in pushed:
        _push(r, origin, url)
    done = await run("crawl", "--state", redis_server.url, "--name", NAME, "-f", "jsonl")
    no_traceback(done)
    assert done.rc == 0, done.err
    assert outside_hits == []  # the other host was never asked anything
    assert "/private/x" not in hits and "/private/x" not in b_hits
    records = {x["url"]: x for x in map(json.loads, done.out.splitlines())}
    for _, url in pushed[:3]:
        assert records[url]["error"] == "out_of_scope", records
        assert records[url]["status"] is None
    assert (a + "/private/x") not in records  # a robots.txt skip, not a page
    assert "refused a leased URL outside the crawl's scope" in done.err
    sums = _sums(r)
    failed = {k: n for k, n in sums.items() if k.startswith(b"f:") and n}
    assert failed == {b"f:out_of_scope": 3, b"f:robots_disallowed": 1}, failed
    assert sums[b"queued"] == 0  # every request pushed was completed


async def _expect_damaged(server: RedisServer, key: str, what: str) -> None:
    """``crawl`` (joining the stored crawl) and ``status`` exit 2 naming ``key``."""
    for args in (("crawl", "-q"), ("status",)):
        done = await run(*args, "--state", server.url, "--name", NAME, timeout=60)
        no_traceback(done)
        assert done.rc == 2, (args, done.rc, done.err)
        assert f"the crawl state in Redis is damaged: key {key} {what}" in done.err, done.err
        assert done.out == ""


@pytest.fixture
async def stored(serve: ServeApp, redis_server: RedisServer) -> redis.Redis:
    hits: list[str] = []
    site = f"http://127.0.0.1:{(await serve(_site(hits))).port}"
    await _crawled(site, redis_server)
    return _client(redis_server)


async def test_a_list_where_a_hash_is_kept_is_exit_2_naming_the_key(
    stored: redis.Redis, redis_server: RedisServer
) -> None:
    key = _a_counts_key(stored)
    stored.delete(key)
    stored.rpush(key, "x")
    await _expect_damaged(redis_server, key, "is a list, where the crawl keeps a hash")


async def test_settings_that_are_not_json_are_exit_2_naming_the_key(
    stored: redis.Redis, redis_server: RedisServer
) -> None:
    stored.set(f"{P}settings", b"{not json")
    await _expect_damaged(redis_server, f"{P}settings", "is not JSON")
    stored.set(f"{P}settings", b"[1, 2]")
    await _expect_damaged(redis_server, f"{P}settings", "holds a JSON list, not an object")


async def test_a_counter_that_is_not_a_number_is_exit_2_naming_the_key(
    stored: redis.Redis, redis_server: RedisServer
) -> None:
    key = _a_counts_key(stored)
    stored.hset(key, "done", b"many")
    await _expect_damaged(redis_server, key, "holds a field that is not an integer")
    stored.hset(key, "done", b"3")
    stored.hset(f"{P}k", "pages", "lots")
    await _expect_damaged(redis_server, f"{P}k", "")


async def test_a_huge_value_is_refused_inside_redis_naming_the_key(
    stored: redis.Redis, redis_server: RedisServer
) -> None:
    size = 65 << 20  # over MAX_SETTINGS (64 MiB)
    stored.setrange(f"{P}settings", size - 1, b"}")
    await _expect_damaged(
        redis_server, f"{P}settings", f"holds {size} bytes, more than the {64 << 20} allowed"
    )


async def test_a_queued_request_that_cannot_be_read_is_exit_2_naming_its_queue(
    serve: ServeApp, redis_server: RedisServer
) -> None:
    hits: list[str] = []
    site = f"http://127.0.0.1:{(await serve(_site(hits))).port}"
    await _crawled(site, redis_server)
    r = _client(redis_server)
    for item in (
        b"garbage",
        b"0\tnot a request",
        b"0\t\t1\t" + site.encode() + b"\t0\t" + b"x" * (5 << 20),
    ):
        key = _push(r, site, site + "/fine")
        r.hset(key, str(_SERIAL), item)
        done = await run("crawl", "--state", redis_server.url, "--name", NAME, "-q")
        no_traceback(done)
        assert done.rc == 2, done.err
        assert f"the crawl state in Redis is damaged: key {key} holds a request" in done.err
        r.hdel(key, str(_SERIAL))
    assert "/fine" not in hits


CONTROLS = "\x1b[2J\x07\x9b31m"  # ESC, BEL, U+009B (CSI on many terminals)
SHOWN = "\\x1b[2J\\x07\\x9b31m"


async def test_status_shows_control_characters_from_redis_escaped(
    stored: redis.Redis, redis_server: RedisServer
) -> None:
    stored.hset(_a_counts_key(stored), f"f:kind{CONTROLS}", 1)
    settings = json.loads(stored.get(f"{P}settings") or b"")
    settings["seeds"].append(f"http://127.0.0.1:9/{CONTROLS}")
    stored.set(f"{P}settings", json.dumps(settings))
    done = await run("status", "--state", redis_server.url, "--name", NAME)
    assert done.rc == 0, done.err
    for c in "\x1b\x07\x9b":
        assert c not in done.out
    assert f"kind{SHOWN} 1" in done.out and f"http://127.0.0.1:9/{SHOWN}" in done.out, done.out
    data = json.loads((await run("status", "--state", redis_server.url, "--name", NAME,
                                 "-f", "json")).out)  # fmt: skip
    assert data["failed"][f"kind{CONTROLS}"] == 1  # JSON escapes by itself: the value as is


async def test_status_shows_control_characters_from_a_state_directory_escaped(
    serve: ServeApp, tmp_path: Path
) -> None:
    hits: list[str] = []
    site = f"http://127.0.0.1:{(await serve(_site(hits))).port}"
    state = tmp_path / "state"
    done = await run("crawl", site + "/", "--state", str(state), "-q")
    assert done.rc == 0, done.err
    (db,) = [p for p in state.iterdir() if p.read_bytes()[:16] == b"SQLite format 3\0"]
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE requests SET url = url || ? WHERE id IN (SELECT id FROM seeds)", (CONTROLS,)
        )
        conn.execute("INSERT INTO failures(kind, n) VALUES (?, 1)", (f"kind{CONTROLS}",))
    conn.close()
    done = await run("status", "--state", str(state))
    assert done.rc == 0, done.err
    for c in "\x1b\x07\x9b":
        assert c not in done.out
    assert f"kind{SHOWN} 1" in done.out and f"{site}/{SHOWN}" in done.out, done.out
