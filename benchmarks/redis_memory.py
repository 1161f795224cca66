"""Redis memory per URL of the Redis crawl state, and its round trips and commands per page.

Starts its own redis-server (tests/redisserver.py: a free 127.0.0.1 port, AOF everysec, a
temporary directory) and measures, with ``INFO memory`` ``used_memory`` before and after:

1. the seen set: N URLs offered with ``queue=False`` (fingerprints only), bytes per URL,
   the bucket count, their encodings (``OBJECT ENCODING``) and the fullest bucket against
   ``set-max-intset-entries``;
2. the whole state: N URLs offered and queued (on ``--origins`` origins), bytes per URL;
3. the engine's pattern of state calls (lease a batch, offer each page's links, complete the
   batch), and 4. the engine itself crawling tests/sitegen.py's site (one worker): round
   trips per page (client calls), Redis commands per page (``INFO commandstats``, which
   counts the commands run inside the scripts too) and Redis CPU seconds per 1,000 pages
   (``INFO cpu``).

Run (nice: the machine is shared)::

    nice -n 10 python benchmarks/redis_memory.py            # 1,000,000 URLs
    nice -n 10 python benchmarks/redis_memory.py --urls 100000 --pages 2000
    nice -n 10 python benchmarks/redis_memory.py --per-page-only     # 3 and 4 only

Prints a JSON object (and a readable summary on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.state import Candidate, Outcome  # noqa: E402
from crawler.state.redis import RedisState  # noqa: E402
from tests.redisserver import RedisServer  # noqa: E402

CHUNK = 512


def _sync(server: RedisServer) -> Any:
    import redis  # noqa: PLC0415

    return redis.Redis.from_url(server.url)


def used_memory(client: Any) -> int:
    return int(client.info("memory")["used_memory"])


def command_calls(client: Any) -> int:
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


def cpu_seconds(client: Any) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def offer_urls(state: RedisState, n: int, origins: int, *, queue: bool) -> float:
    t = time.perf_counter()
    fp = state.fingerprint
    for start in range(0, n, CHUNK * 8):
        batch = []
        for i in range(start, min(n, start + CHUNK * 8)):
            host = f"h{i % origins}.example"
            url = f"http://{host}/section/{i // 7}/page-{i}.html?ref=nav"
            batch.append(Candidate(url, fp(url), f"http://{host}", host, 1, None, 0, queue))
        await state.offer_many(batch)
    return time.perf_counter() - t


def bucket_report(client: Any, name: str) -> dict[str, Any]:
    # key layout 3: each shard's own buckets, crawler:{NAME:sK}:s:<hex>
    keys = list(client.scan_iter(match=f"crawler:{{{name}:s*}}:s:*", count=5000))
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.scard(k)
    sizes = pipe.execute()
    sample = keys[:: max(1, len(keys) // 200)]
    pipe = client.pipeline(transaction=False)
    for k in sample:
        pipe.object("encoding", k)
    encodings = sorted({e.decode() if isinstance(e, bytes) else str(e) for e in pipe.execute()})
    limit = int(client.config_get("set-max-intset-entries")["set-max-intset-entries"])
    return {
        "buckets": len(keys),
        "members": sum(sizes),
        "fullest_bucket": max(sizes, default=0),
        "mean_bucket": round(sum(sizes) / len(keys), 1) if keys else 0,
        "set_max_intset_entries": limit,
        "encodings_sampled": encodings,
    }


async def engine_pattern(state: RedisState, client: Any, pages: int) -> dict[str, Any]:
    """Lease 16, offer 30 links a page (a third new), complete the batch: as the engine does."""
    seeds = [f"http://s{i % 8}.example/p{i}" for i in range(64)]
    fp = state.fingerprint
    await state.offer_many(
        [Candidate(u, fp(u), u.rsplit("/", 1)[0], u.split("/")[2], 0) for u in seeds]
    )
    calls0, cmds0, cpu0 = state.calls, command_calls(client), cpu_seconds(client)
    done = 0
    t = time.perf_counter()
    now = time.time()
    serial = 0
    while done < pages:
        batch = await state.lease(16, now)
        if not batch:
            break
        for lease in batch:
            links = []
            for j in range(30):
                if j % 3 == 0:
                    serial += 1
                    url = f"{lease.origin}/n{serial}"
                else:
                    url = f"{lease.origin}/common{j}"  # the same links on every page
                if state.seen(fp(url)):
                    continue  # the engine's local probe: no candidate, no round trip
                links.append(Candidate(url, fp(url), lease.origin, lease.origin[7:], 1))
            if links:
                await state.offer_many(links)
        await state.complete_many([(x, Outcome(status=200)) for x in batch], now)
        done += len(batch)
    wall = time.perf_counter() - t
    calls = state.calls - calls0
    cmds = command_calls(client) - cmds0 - 3  # the three INFO calls of this measurement
    cpu = cpu_seconds(client) - cpu0
    return {
        "pages": done,
        "round_trips_per_page": round(calls / done, 3),
        "redis_commands_per_page": round(cmds / done, 1),
        "redis_cpu_seconds_per_1000_pages": round(cpu / done * 1000, 3),
        "pages_per_second_state_only": round(done / wall),
    }


async def real_crawl(server: RedisServer, client: Any, n: int) -> dict[str, Any]:
    """The engine itself (one worker) crawling tests/sitegen.py's site of ``n`` pages."""
    from aiohttp.test_utils import TestServer  # noqa: PLC0415

    from crawler.config import CrawlConfig  # noqa: PLC0415
    from crawler.core.engine import Crawler  # noqa: PLC0415
    from tests.sitegen import Site  # noqa: PLC0415

    site = Site(n=n)
    web = TestServer(site.app(), host="127.0.0.1", port=0)
    await web.start_server()
    try:
        site.origin = str(web.make_url("")).rstrip("/")
        cfg = CrawlConfig(
            seeds=(site.origin + "/p/0.html",), state=server.url, name="site", concurrency=8
        )
        state = RedisState(server.url, name="site")
        cmds0, cpu0 = command_calls(client), cpu_seconds(client)
        t = time.perf_counter()
        pages = 0
        async with Crawler(cfg, state=state) as crawler:
            async for _ in crawler:
                pages += 1
        wall = time.perf_counter() - t
        cmds = command_calls(client) - cmds0 - 2  # the two INFO calls of this measurement
        cpu = cpu_seconds(client) - cpu0
    finally:
        await web.close()
    return {
        "pages": pages,
        "round_trips_per_page": round(state.calls / pages, 3),
        "redis_commands_per_page": round(cmds / pages, 1),
        "redis_cpu_seconds_per_1000_pages": round(cpu / pages * 1000, 3),
        "wall_seconds": round(wall, 2),
    }


async def memory_runs(server: RedisServer, client: Any, args: Any) -> dict[str, Any]:
    """Runs 1 and 2: the seen set alone, then the whole state, each from an empty database."""
    out: dict[str, Any] = {}
    seen = RedisState(server.url, name="seen", seen_bits=args.seen_bits)
    await seen.open(per_host=8, delay=0.0, max_pages_per_host=0)
    empty = used_memory(client)
    secs = await offer_urls(seen, args.urls, args.origins, queue=False)
    after = used_memory(client)
    out["seen_set"] = {
        "bytes_per_url": round((after - empty) / args.urls, 2),
        "used_memory_before": empty,
        "used_memory_after": after,
        "offers_per_second": round(args.urls / secs),
        **bucket_report(client, "seen"),
    }
    await seen.close()
    client.flushall()

    base = used_memory(client)
    full = RedisState(server.url, name="full", seen_bits=args.seen_bits)
    await full.open(per_host=8, delay=0.0, max_pages_per_host=0)
    secs = await offer_urls(full, args.urls, args.origins, queue=True)
    after = used_memory(client)
    out["queued"] = {
        "bytes_per_url": round((after - base) / args.urls, 2),
        "origins": args.origins,
        "used_memory_before": base,
        "used_memory_after": after,
        "offers_per_second": round(args.urls / secs),
    }
    await full.close()
    client.flushall()
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--origins", type=int, default=1000)
    ap.add_argument("--pages", type=int, default=5000)
    ap.add_argument("--seen-bits", type=int, default=16)
    ap.add_argument("--site-pages", type=int, default=400)
    ap.add_argument("--per-page-only", action="store_true", help="skip runs 1 and 2 (memory)")
    ap.add_argument(
        "--intset-max",
        type=int,
        default=0,
        help="redis-server --set-max-intset-entries (0: its default)",
    )
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        RedisServer(
            Path(tmp),
            extra=["--set-max-intset-entries", str(args.intset_max)] if args.intset_max else [],
        ) as server,
    ):
        client = _sync(server)
        version = client.info("server")["redis_version"]
        result: dict[str, Any] = {"redis": version}
        if not args.per_page_only:
            result["urls"] = args.urls
            result.update(await memory_runs(server, client, args))
        pattern = RedisState(server.url, name="engine")
        await pattern.open(per_host=4, delay=0.0, max_pages_per_host=0)
        result["engine_pattern"] = await engine_pattern(pattern, client, args.pages)
        await pattern.close()
        result["engine_crawl"] = await real_crawl(server, client, args.site_pages)
        client.close()
    print(json.dumps(result, indent=2))
    if not args.per_page_only:
        s, q = result["seen_set"], result["queued"]
        print(
            f"seen set: {s['bytes_per_url']} B/URL at {args.urls:,} URLs"
            f" ({s['buckets']} buckets, fullest {s['fullest_bucket']}"
            f" of {s['set_max_intset_entries']}, {'/'.join(s['encodings_sampled'])});"
            f" queued state: {q['bytes_per_url']} B/URL",
            file=sys.stderr,
        )
    for what, d in (
        ("state calls as the engine makes them", result["engine_pattern"]),
        ("the engine crawling a site", result["engine_crawl"]),
    ):
        print(
            f"{what}: {d['pages']} pages, {d['round_trips_per_page']} round trips,"
            f" {d['redis_commands_per_page']} Redis commands,"
            f" {d['redis_cpu_seconds_per_1000_pages']} Redis CPU s per 1000 pages",
            file=sys.stderr,
        )


if __name__ == "__main__":
    asyncio.run(main())
