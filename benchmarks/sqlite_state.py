"""The SQLite state on its own: synchronous=NORMAL vs FULL, and open (resume) time at 1M URLs.

    python benchmarks/sqlite_state.py                  # both parts
    python benchmarks/sqlite_state.py --parts sync --pages 3000
    python benchmarks/sqlite_state.py --parts open --urls 1000000

``sync``
    A simulated crawl straight through the protocol (no network, no parsing, so the state's
    own cost shows): ``--concurrency`` page tasks, each leases a page, offers its 20 links
    (about half of them new) in one chunk, and completes it; the dispatcher batches
    completions as the engine does. Memory state, SQLite NORMAL and SQLite FULL side by
    side: pages/s, CPU s, transactions (``state.commits``) per page.
``open``
    Time of ``open()`` (recovery + loading the fingerprints + the queued origins) on a
    state of ``--urls`` URLs, all queued, and on one of the same size where 90% are done:
    the cost follows the URLs seen (O(seen)), not the pages fetched.

Each measurement runs in a child process (``--child``) so that its CPU time is its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.state import Candidate, Lease, Outcome, open_state  # noqa: E402
from crawler.state._sqlite_files import check_database  # noqa: E402
from crawler.state.sqlite import SQLiteState  # noqa: E402

ORIGIN, HOST = "http://bench.test:80", "bench.test"


def url(i: int) -> str:
    return f"http://bench.test/section-{i % 97}/page-{i}.html"


async def simulated_crawl(backend: str, where: str, pages: int, concurrency: int) -> dict:
    if backend == "memory":
        state = open_state(None)
    else:
        state = SQLiteState(where, synchronous=backend.split("-")[1])
    await state.open(per_host=concurrency, delay=0.0, max_pages_per_host=0)
    fp = state.fingerprint
    await state.offer_many([Candidate(url(0), fp(url(0)), ORIGIN, HOST, 0)])
    done: list[tuple[Lease, Outcome]] = []
    wake = asyncio.Event()
    fetched = 0

    async def page(lease: Lease) -> None:
        n = int(lease.url.rsplit("-", 1)[1].split(".")[0])
        links = [url(n * 10 + k) for k in range(1, 11)] + [url(max(0, n - k)) for k in range(10)]
        cands = [
            Candidate(u, f, ORIGIN, HOST, lease.depth + 1, lease.url)
            for u in links
            if not state.seen(f := fp(u))
        ]
        if cands:
            await state.offer_many(cands)
        await asyncio.sleep(0)  # the fetch
        done.append((lease, Outcome(None, 200, 1000)))
        wake.set()

    tasks: set[asyncio.Task[None]] = set()
    cpu, wall = time.process_time(), time.perf_counter()
    while fetched < pages:
        if done:
            batch, done[:] = list(done), []
            await state.add_counters({"pages": len(batch)})
            await state.complete_many(batch, time.time())
        room = min(concurrency - len(tasks), pages - fetched)
        leases = await state.lease(room, time.time()) if room > 0 else []
        for lease in leases:
            fetched += 1
            task = asyncio.create_task(page(lease))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if not leases:
            wake.clear()
            await wake.wait()
    await asyncio.gather(*tasks)
    if done:
        await state.complete_many(done, time.time())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    counts = await state.counts()
    commits = getattr(state, "commits", 0)
    await state.close()
    return {
        "backend": backend,
        "pages": counts.done,
        "seen": counts.seen,
        "wall": wall,
        "cpu": cpu,
        "commits": commits,
    }


async def build(where: str, n: int, done_share: float) -> None:
    state = SQLiteState(where)
    await state.open(per_host=1_000_000, delay=0.0, max_pages_per_host=0)
    fp = state.fingerprint
    for start in range(0, n, 1000):
        urls = [url(i) for i in range(start, min(n, start + 1000))]
        await state.offer_many([Candidate(u, fp(u), ORIGIN, HOST, 1) for u in urls])
    left = int(n * done_share)
    while left > 0:
        leases = await state.lease(min(left, 5000), time.time())
        await state.complete_many([(le, Outcome()) for le in leases], time.time())
        left -= len(leases)
    await state.close()


async def time_open(where: str) -> dict:
    t = time.perf_counter()
    check_database(where)  # the read-only checks open() begins with, alone
    check_s = time.perf_counter() - t
    t = time.perf_counter()
    cpu = time.process_time()
    state = SQLiteState(where)
    await state.open(per_host=8, delay=0.0, max_pages_per_host=0)
    counts = await state.counts()
    first = await state.lease(8, time.time())
    result = {
        "open_s": time.perf_counter() - t,
        "open_cpu_s": time.process_time() - cpu,
        "check_s": check_s,
        "seen": counts.seen,
        "done": counts.done,
        "queued": counts.queued,
        "first_lease": len(first),
    }
    await state.close()
    return result


def child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="sync,open")
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        what, *rest = args.child
        if what == "crawl":
            backend, where, pages, conc = rest
            result = asyncio.run(simulated_crawl(backend, where, int(pages), int(conc)))
        elif what == "build":
            asyncio.run(build(rest[0], int(rest[1]), float(rest[2])))
            result = {}
        else:
            result = asyncio.run(time_open(rest[0]))
        print(json.dumps(result))
        return
    tmp = Path(tempfile.mkdtemp(prefix="sqlite-state-bench-"))
    print(f"load {os.getloadavg()[0]:.2f}, 2 CPUs shared; figures are best of {args.repeat}")
    try:
        if "sync" in args.parts:
            print(
                f"\nsimulated crawl: {args.pages} pages, 20 links each, concurrency "
                f"{args.concurrency}\n{'backend':<14}{'pages/s':>10}{'CPU s':>8}"
                f"{'us CPU/page':>13}{'commits/page':>14}"
            )
            best: dict[str, dict] = {}
            for _ in range(args.repeat):
                for backend in ("memory", "sqlite-normal", "sqlite-full"):
                    where = str(tmp / backend)
                    shutil.rmtree(where, ignore_errors=True)
                    r = child(["crawl", backend, where, str(args.pages), str(args.concurrency)])
                    if backend not in best or r["wall"] < best[backend]["wall"]:
                        best[backend] = r
            for backend, r in best.items():
                print(
                    f"{backend:<14}{r['pages'] / r['wall']:>10.0f}{r['cpu']:>8.2f}"
                    f"{r['cpu'] / r['pages'] * 1e6:>13.0f}{r['commits'] / r['pages']:>14.2f}"
                )
        if "open" in args.parts:
            n = args.urls
            print(f"\nopen() of a state of {n} URLs (child process, after the OS cache is warm)")
            print(
                f"{'state':<14}{'open s':>8}{'CPU s':>8}{'of which checks s':>19}"
                f"{'seen':>10}{'done':>10}{'disk MB':>9}"
            )
            for name, share in (("all queued", 0.0), ("90% done", 0.9)):
                where = str(tmp / name.replace(" ", "-").replace("%", ""))
                child(["build", where, str(n), str(share)])
                r = min(
                    (child(["open", where]) for _ in range(args.repeat)), key=lambda r: r["open_s"]
                )
                disk = sum(f.stat().st_size for f in Path(where).iterdir()) / 1e6
                print(
                    f"{name:<14}{r['open_s']:>8.2f}{r['open_cpu_s']:>8.2f}{r['check_s']:>19.2f}"
                    f"{r['seen']:>10}{r['done']:>10}{disk:>9.1f}"
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
