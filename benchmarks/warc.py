"""The cost of ``--warc`` and ``--format sitemap`` outside the network.

``python benchmarks/warc.py warc [--repeat N] [--level L]``: every page of the corpus
(``../shared/corpus/pages``) archived as a response/request pair by crawler.warc's writer,
fed in 64 KiB chunks as the fetcher does; prints MB/s of body archived (CPU time) and the
file's size against the bodies' (``--level`` sets the gzip level: 6 is ours, 9 warcio's).

``python benchmarks/warc.py repair [--records N]``: a file of N pairs with 100 KB random
bodies (200 MB at the default 2,000), cut 50,000 bytes before its end as a kill would leave
it; prints the time :func:`crawler.warc.repair_tail` takes to find the last whole pair and
cut the rest (it scans back from the end: the file's size should not matter).

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

from crawler import warc  # noqa: E402
from crawler.config import CrawlConfig  # noqa: E402
from crawler.output import open_sink  # noqa: E402
from crawler.results import PageResult  # noqa: E402


def bench_warc(repeat: int, level: int) -> None:
    warc.GZIP_LEVEL = level
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
    print(
        f"repair: a {size / 1e6:.1f} MB file ({records} pairs) cut 50,000 bytes before its end:"
        f" {cut:,} bytes cut back to the last whole pair in {took * 1000:.1f} ms"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("warc")
    w.add_argument("--repeat", type=int, default=3)
    w.add_argument("--level", type=int, default=6)
    r = sub.add_parser("repair")
    r.add_argument("--records", type=int, default=2000)
    s = sub.add_parser("sitemap")
    s.add_argument("--urls", type=int, default=1_000_000)
    s.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.what == "warc":
        bench_warc(args.repeat, args.level)
    elif args.what == "repair":
        bench_repair(args.records)
    elif args.child:
        sitemap_child(args.urls)
    else:
        cmd = [sys.executable, __file__, "sitemap", "--urls", str(args.urls), "--child"]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
