"""The cost of ``--warc`` and ``--format sitemap`` outside the network.

``python benchmarks/warc.py warc [--repeat N] [--level L]``: every page of the corpus
(``../shared/corpus/pages``) archived as a response/request pair by crawler.output.warc's writer,
fed in 64 KiB chunks as the fetcher does; prints MB/s of body archived (CPU time) and the
file's size against the bodies' (``--level`` sets the gzip level: 6 is ours, 9 warcio's).

``python benchmarks/warc.py repair [--records N]``: a file of N pairs with 100 KB random
bodies (200 MB at the default 2,000), cut 50,000 bytes before its end as a kill would leave
it; prints the time :func:`crawler.output.warc.repair_tail` takes to find the last whole pair and
cut the rest (it scans back from the end: the file's size should not matter).

``python benchmarks/warc.py crawl [--pages N] [--runs R]``: a local aiohttp site (its own
process) of N pages, each a corpus page plus links to the next ones, crawled by ``crawler
crawl`` child processes without and with ``--warc`` (alternating, R runs each); prints each
run's wall time and CPU seconds (user+sys, from os.wait4) and the medians' ratio.

``python benchmarks/warc.py sitemap [--urls N]``: N page URLs (default 1,000,000, each once
plus 10% reported twice) through the sitemap sink to a file, then its close (dedup on disk,
index and parts written); prints the time and the process's peak RSS, in a child process so
that the peak is this work's alone.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "pages"
sys.path.insert(0, str(ROOT))

from crawler.config import CrawlConfig  # noqa: E402
from crawler.core.results import PageResult  # noqa: E402
from crawler.output import warc, warc_gzip, warc_scan  # noqa: E402
from crawler.output.sinks import open_sink  # noqa: E402


def bench_warc(repeat: int, level: int) -> None:
    warc_gzip.GZIP_LEVEL = level
    bodies = [p.read_bytes() for p in sorted(CORPUS.glob("*.html"))]
    total = sum(map(len, bodies)) * repeat
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.warc.gz"
        writer = warc.open_archive(CrawlConfig(seeds=("http://127.0.0.1/",)), path=str(path))
        t0 = time.process_time()
        for r in range(repeat):
            for i, body in enumerate(bodies):
                record = writer.begin(
                    url=f"http://127.0.0.1/{r}/{i}.html",
                    method="GET",
                    request_headers=[("Host", "127.0.0.1"), ("User-Agent", "bench")],
                    http_version="HTTP/1.1",
                    status=200,
                    reason="OK",
                    response_version="HTTP/1.1",
                    response_headers=[(b"Content-Type", b"text/html"), (b"Server", b"x")],
                    peer_ip="127.0.0.1",
                )
                for j in range(0, len(body), 65536):
                    record.write(body[j : j + 65536])
                record.end(None)
        writer.close()
        cpu = time.process_time() - t0
        size = path.stat().st_size
    print(
        f"warc: level {level}: {len(bodies) * repeat} pairs, {total / 1e6:.1f} MB of bodies in"
        f" {cpu:.2f} CPU s = {total / 1e6 / cpu:.1f} MB/s; file {size / 1e6:.1f} MB"
        f" ({100 * size / total:.1f}% of the bodies)"
    )


def bench_repair(records: int) -> None:
    body = os.urandom(100_000)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.warc.gz")
        writer = warc.open_archive(CrawlConfig(seeds=("http://127.0.0.1/",)), path=path)
        for i in range(records):
            record = writer.begin(
                url=f"http://127.0.0.1/{i}",
                method="GET",
                request_headers=[("Host", "127.0.0.1")],
                http_version="HTTP/1.1",
                status=200,
                reason="OK",
                response_version="HTTP/1.1",
                response_headers=[(b"Content-Type", b"application/octet-stream")],
                peer_ip="127.0.0.1",
            )
            record.write(body)
            record.end(None)
        writer.close()
        size = os.path.getsize(path)
        os.truncate(path, size - 50_000)
        t0 = time.perf_counter()
        cut = warc.repair_tail(path)
        took = time.perf_counter() - t0
        # `crawler warc repair`: every member read from the start (CRC, length, block digest)
        os.truncate(path, size - 50_000)
        t0, c0 = time.perf_counter(), time.process_time()
        scanned = warc_scan.repair(path)
        scan_took, scan_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"repair: a {size / 1e6:.1f} MB file ({records} pairs) cut 50,000 bytes before its end:"
        f" {cut:,} bytes cut back to the last whole pair in {took * 1000:.1f} ms"
    )
    print(
        f"crawler warc repair (the whole file read): {scanned.records:,} whole records,"
        f" {scanned.size - scanned.end:,} bytes cut, in {scan_took:.2f} s"
        f" ({scan_cpu:.2f} CPU s, {size / 1e6 / scan_cpu:.0f} MB/CPU s)"
    )


def sitemap_child(urls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sitemap.xml")
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        sink = open_sink("sitemap", out, resume=False)
        sink.start(False)
        page = PageResult("", 0, status=200, content_type="text/html")
        for i in range(urls):
            page.final_url = f"https://www.example.com/section-{i % 997}/page-{i}.html?ref=x"
            sink.page(page)
            if i % 10 == 0:  # 10% reported twice (redirects, refetches after a kill)
                sink.page(page)
        fed = time.perf_counter() - t0
        sink.close()
        total = time.perf_counter() - t0
        files = sorted(os.listdir(tmp))
        size = sum(os.path.getsize(os.path.join(tmp, f)) for f in files)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert sink.error is None, sink.error
    print(
        f"sitemap: {urls:,} URLs (+10% twice): fed in {fed:.1f} s, built in {total - fed:.1f} s"
        f" ({total:.1f} s in all); {len(files)} files ({size / 1e6:.1f} MB, the side file"
        f" included); peak RSS {rss / 1024:.1f} MB (was {rss0 / 1024:.1f} MB before the sink)"
    )


def serve_site(pages: int) -> None:
    """The crawl benchmark's site (a child process): prints its port, serves until killed."""
    import asyncio  # noqa: PLC0415

    from aiohttp import web  # noqa: PLC0415

    bodies = [p.read_bytes() for p in sorted(CORPUS.glob("*.html"))]

    async def page(request: web.Request) -> web.Response:
        n = request.match_info["n"]
        if not n.isdigit():
            return web.Response(status=404)
        i = int(n)
        links = "".join(f'<a href="/p/{(i * 7 + k) % pages}">x</a>' for k in range(1, 6))
        body = bodies[i % len(bodies)] + links.encode()
        return web.Response(body=body, content_type="text/html")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/p/{n}", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def bench_crawl(pages: int, runs: int) -> None:
    site = subprocess.Popen(
        [sys.executable, __file__, "site", "--pages", str(pages)], stdout=subprocess.PIPE
    )
    try:
        assert site.stdout is not None
        port = int(site.stdout.readline())
        seed = f"http://127.0.0.1:{port}/p/0"
        cpu: dict[bool, list[float]] = {False: [], True: []}
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(runs):
                for archive in (False, True):
                    cmd = [sys.executable, "-m", "crawler", "crawl", seed, "-q", "-o", os.devnull]
                    # the corpus pages' own relative links are not followed: only /p/N
                    cmd += ["--ignore-robots", "--concurrency", "16", "--include", r"/p/\d+$"]
                    if archive:
                        cmd += ["--warc", os.path.join(tmp, f"run{run}.warc.gz")]
                    t0 = time.perf_counter()
                    child = subprocess.Popen(cmd, cwd=ROOT)
                    _, status, usage = os.wait4(child.pid, 0)
                    wall = time.perf_counter() - t0
                    assert os.waitstatus_to_exitcode(status) == 0
                    used = usage.ru_utime + usage.ru_stime
                    cpu[archive].append(used)
                    size = ""
                    if archive:
                        size = f", file {os.path.getsize(cmd[-1]) / 1e6:.1f} MB"
                    label = "with --warc" if archive else "without   "
                    print(
                        f"crawl: {pages} pages {label}: {wall:.2f} s wall, {used:.2f} CPU s{size}"
                    )
        mid = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
        print(
            f"crawl: median CPU s {mid[False]:.2f} without, {mid[True]:.2f} with --warc"
            f" ({mid[True] / mid[False]:.2f}x)"
        )
    finally:
        site.kill()
        site.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("warc")
    w.add_argument("--repeat", type=int, default=3)
    w.add_argument("--level", type=int, default=6)
    c = sub.add_parser("crawl")
    c.add_argument("--pages", type=int, default=2000)
    c.add_argument("--runs", type=int, default=3)
    t = sub.add_parser("site")
    t.add_argument("--pages", type=int, default=2000)
    r = sub.add_parser("repair")
    r.add_argument("--records", type=int, default=2000)
    s = sub.add_parser("sitemap")
    s.add_argument("--urls", type=int, default=1_000_000)
    s.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.what == "warc":
        bench_warc(args.repeat, args.level)
    elif args.what == "crawl":
        bench_crawl(args.pages, args.runs)
    elif args.what == "site":
        serve_site(args.pages)
    elif args.what == "repair":
        bench_repair(args.records)
    elif args.child:
        sitemap_child(args.urls)
    else:
        cmd = [sys.executable, __file__, "sitemap", "--urls", str(args.urls), "--child"]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
