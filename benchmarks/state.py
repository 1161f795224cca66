#!/usr/bin/env python3
"""Crawl state benchmarks (issue 10): the memory state vs ``--state DIR`` (SQLite), side by side.

    python benchmarks/state.py                       # every part below
    python benchmarks/state.py --parts frontier,crawl --quick
    python benchmarks/state.py --json /tmp/statebench/state.json

Parts (``--parts``, comma list), each run as child processes so that RSS and CPU are theirs:

``frontier``
    One page that links 1,000,000 URLs (a static file served by nginx), crawled by
    ``crawler crawl URL --max-pages 1`` with the memory state and with ``--state DIR``:
    the crawl fetches that page, queues its million URLs and stops. Peak RSS (VmHWM of the
    crawler process), wall and CPU seconds; the issue's bars: <= 100 MB with ``--state``,
    <= 2x the memory state's wall time. The output (``-f urls``) is counted to prove the
    million URLs were discovered; ``crawler status`` says how many are queued.
``crawl``
    pages/s and CPU s of ``crawler crawl`` (the crawl benchmark's ``ours-cli`` command) on the
    crawl benchmark's site (benchmarks/crawl/sitegen.py, nginx, crawler pinned to one core),
    memory vs ``--state``, alternating, ``--repeat`` times each; the bar: >= 80% of the
    memory state's pages/s. With ``--scrapy``: Scrapy without and with ``JOBDIR`` on the same
    site (Scrapy's own disk queue; the issue's 42% is measured here, not quoted).
``bytes``
    Bytes per URL on disk and in memory at 1M and 10M URLs, by offering candidates straight
    to the backend (``open_state(...).offer_many`` in chunks of 1,000, URLs of
    benchmarks/seen_memory.py: 997 hosts, 60-90 characters) in a child process: disk is the
    size of every file under DIR after ``close()``, memory the child's RSS growth over its
    RSS once the state was opened (VmRSS, after ``gc.collect()``), divided by N. The memory
    state is measured the same way.
``resume``
    Resume time after 10,000 vs 100,000 pages fetched (must not grow with pages fetched):
    a site of small pages (nginx), crawled with ``--state`` and ``--max-pages K``; then the
    resumed run ``--max-pages K+200`` is timed end to end (start-up, open, recovery, 200
    pages, close), and ``open()`` + ``counts()`` + the first ``lease()`` alone in a child.

Needs nginx (installed with apt-get when missing, by benchmarks/crawl.py's helper) and, for
``--scrapy``, Scrapy (pip). Figures and commands: benchmarks/STATE.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import crawl as cb  # noqa: E402  (benchmarks/crawl.py: nginx, runs, the site generator)
from seen_memory import urls as sample_urls  # noqa: E402

PY = sys.executable
log = cb.log


def _rss_kib(field: str = "VmRSS") -> int:
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(field.encode() + b":"):
                return int(line.split()[1])
    return 0


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


# ----------------------------------------------------------------- child: offer N to a backend


async def _child_offer(backend: str, n: int, directory: str) -> dict[str, Any]:
    from crawler.state import Candidate, open_state  # noqa: PLC0415
    from crawler.urls.policy import host_of, origin_of  # noqa: PLC0415

    state = open_state(directory if backend == "sqlite" else None)
    await state.open(per_host=8, delay=0.0, max_pages_per_host=0)
    gc.collect()
    base = _rss_kib()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    chunk: list[Candidate] = []
    origins: dict[str, tuple[str, str]] = {}
    fp = state.fingerprint
    for url in sample_urls(n):
        key = url[: url.index("/", 8)]
        oh = origins.get(key)
        if oh is None:
            oh = origins[key] = (origin_of(url), host_of(url))
        chunk.append(Candidate(url, fp(url), oh[0], oh[1], 1, None))
        if len(chunk) == 1000:
            await state.offer_many(chunk)
            chunk = []
    if chunk:
        await state.offer_many(chunk)
    offer_s = time.perf_counter() - t0
    offer_cpu = time.process_time() - cpu0
    chunk = []
    gc.collect()
    after = _rss_kib()
    counts = await state.counts()
    t1 = time.perf_counter()
    await state.close()
    close_s = time.perf_counter() - t1
    disk = _du(Path(directory)) if backend == "sqlite" else 0
    return {
        "backend": backend,
        "n": n,
        "queued": counts.queued,
        "offer_s": offer_s,
        "offer_cpu_s": offer_cpu,
        "close_s": close_s,
        "rss_base_kib": base,
        "rss_after_kib": after,
        "hwm_kib": _rss_kib("VmHWM"),
        "mem_bytes_per_url": (after - base) * 1024 / n,
        "disk_bytes": disk,
        "disk_bytes_per_url": disk / n,
    }


async def _child_open(directory: str) -> dict[str, Any]:
    """Time what a resumed crawl pays before its first request: open, counts, one lease."""
    t0 = time.perf_counter()
    from crawler.state import open_state  # noqa: PLC0415

    imported = time.perf_counter() - t0
    state = open_state(directory)
    t1 = time.perf_counter()
    await state.open(per_host=16, delay=0.0, max_pages_per_host=0)
    opened = time.perf_counter() - t1
    counts = await state.counts()
    t2 = time.perf_counter()
    leases = await state.lease(1, time.time())
    leased = time.perf_counter() - t2
    # Put it back as it was: this measurement must not change the state it measures.
    for lease in leases:
        await state.retry(lease, 0.0, time.time())
    await state.close()
    return {
        "import_s": imported,
        "open_s": opened,
        "first_lease_s": leased,
        "done": counts.done,
        "queued": counts.queued,
        "seen": counts.seen,
        "hwm_kib": _rss_kib("VmHWM"),
    }


def _child_scrapy(url: str, jobdir: str | None, conc: int, limit: float) -> None:
    """The crawl benchmark's Scrapy spider (imported, not copied), with JOBDIR when given."""
    sys.path.insert(0, str(HERE / "crawl"))
    from scrapy.crawler import CrawlerProcess  # noqa: PLC0415
    from scrapy_spider import BenchSpider  # noqa: PLC0415

    settings: dict[str, Any] = {
        "CONCURRENT_REQUESTS": conc,
        "CONCURRENT_REQUESTS_PER_DOMAIN": conc,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "WARNING",
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
        "CLOSESPIDER_TIMEOUT": limit,
    }
    if jobdir:
        settings["JOBDIR"] = jobdir
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchSpider)
    process.crawl(crawler, start=url)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    print(
        json.dumps(
            {
                "pages": getattr(crawler.spider, "pages", 0),
                "finish_reason": stats.get("finish_reason"),
            }
        ),
        flush=True,
    )


def _child(argv: list[str]) -> int:
    kind = argv[0]
    if kind == "offer":
        print(json.dumps(asyncio.run(_child_offer(argv[1], int(argv[2]), argv[3]))))
    elif kind == "open":
        print(json.dumps(asyncio.run(_child_open(argv[1]))))
    elif kind == "scrapy":
        _child_scrapy(argv[1], argv[2] or None, int(argv[3]), float(argv[4]))
    else:
        raise SystemExit(f"unknown child {kind!r}")
    return 0


def _run_child(args: list[str], timeout: float = 3600) -> dict[str, Any]:
    res = subprocess.run(
        [PY, __file__, "_child", *args], capture_output=True, text=True, timeout=timeout
    )
    if res.returncode != 0:
        raise SystemExit(f"child {args} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert isinstance(data, dict)
    return data


# ----------------------------------------------------------------- sites


def build_links_page(root: Path, n: int) -> Path:
    """``index.html`` linking ``n`` distinct same-host URLs (benchmarks/seen_memory.py paths)."""
    root.mkdir(parents=True, exist_ok=True)
    stamp = root / "site.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("n") == n:
        return root
    with open(root / "index.html", "w") as f:
        f.write("<!doctype html><html><head><meta charset=utf-8><title>1M</title></head><body>\n")
        for i in range(n):
            f.write(
                f'<a href="/section-{i % 89}/articles/{i // 1000}/story-{i}.html'
                f'?ref=home&amp;page={i % 7}">{i}</a>\n'
            )
        f.write("</body></html>\n")
    stamp.write_text(json.dumps({"n": n}))
    return root


def build_tiny_site(root: Path, n: int, fanout: int = 20) -> Path:
    """``n`` pages of about 1 KB: page i links its ``fanout`` children and 5 random pages."""
    stamp = root / "site.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("n") == n:
        return root
    rng = random.Random(1)
    (root / "t").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        kids = range(fanout * i + 1, min(fanout * i + fanout + 1, n))
        others = [rng.randrange(n) for _ in range(5)]
        links = "".join(f'<li><a href="/t/{j}.html">page {j}</a></li>' for j in (*kids, *others))
        body = (
            "<!doctype html><html><head><meta charset=utf-8><title>t</title></head><body>"
            f"<h1>page {i}</h1><ul>{links}</ul><p>{'text ' * 40}</p></body></html>"
        )
        name = root / ("index.html" if i == 0 else f"t/{i}.html")
        name.write_text(body)
    (root / "t" / "0.html").write_text((root / "index.html").read_text())
    stamp.write_text(json.dumps({"n": n}))
    return root


# ----------------------------------------------------------------- parts


def ours_cmd(url: str, conc: int, *extra: str) -> list[str]:
    [run] = cb.commands(["ours-cli"], url, conc, 600, "wget", Path(tempfile.gettempdir()))
    return [*run.cmd, *extra]


def measure(
    name: str, cmd: list[str], nginx: cb.Nginx, core: int, workdir: Path, limit: float = 1800
) -> cb.Run:
    run = cb.Run(name, cmd)
    log(f"running {name}: {' '.join(cmd)}")
    cb.run_one(run, nginx, core, limit, workdir)
    log(f"  {name}: {run.pages} pages, {run.wall:.2f} s, {run.cpu:.2f} CPU s, {run.rss_mb:.1f} MB")
    if run.exit not in (0, None):
        log(f"  {name} exited {run.exit}: {(workdir / f'{name}.err').read_text()[-1500:]}")
    return run


def _status(state: Path) -> dict[str, Any]:
    res = subprocess.run(
        [PY, "-m", "crawler", "status", "--state", str(state), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-500:]}
    data = json.loads(res.stdout)
    assert isinstance(data, dict)
    return data


def part_frontier(args: argparse.Namespace, nginx_bin: str, out: dict[str, Any]) -> str:
    n = args.frontier_urls
    site = build_links_page(Path(args.site_dir) / f"links-{n}", n)
    size = (site / "index.html").stat().st_size
    nginx = cb.Nginx(nginx_bin, site, args.nginx_core)
    work = Path(tempfile.mkdtemp(prefix="statebench-frontier-"))
    rows = []
    try:
        (site / "index.html").read_bytes()  # warm the page cache
        url = nginx.base + "/"
        for rep in range(args.repeat):
            for mode in ("memory", "state"):
                state = work / f"state-{rep}"
                o = work / f"{mode}-{rep}.urls"
                cmd = [PY, "-m", "crawler", "crawl", url, "--max-pages", "1", "--ignore-robots"]
                cmd += ["--max-body-bytes", str(size + 1), "-q", "-f", "urls", "-o", str(o)]
                if mode == "state":
                    cmd += ["--state", str(state)]
                run = measure(f"{mode}-{rep}", cmd, nginx, args.crawler_core, work)
                listed = 0
                if o.exists():
                    with open(o, "rb") as f:
                        listed = sum(1 for _ in f)
                row = {"mode": mode, "listed": listed, **asdict(run)}
                if mode == "state":
                    row["status"] = _status(state)
                    row["disk_bytes"] = _du(state)
                    shutil.rmtree(state, ignore_errors=True)
                o.unlink(missing_ok=True)
                rows.append(row)
    finally:
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
    out["frontier"] = {"urls": n, "page_bytes": size, "runs": rows}
    lines = [
        f"frontier: one page ({size / 1e6:.1f} MB) linking {n:,} URLs, "
        "`crawler crawl URL --max-pages 1 --max-body-bytes SIZE -f urls -q`, one core",
        f"{'run':<10} {'listed':>9} {'wall s':>7} {'CPU s':>7} {'peak RSS MB':>12} "
        f"{'queued':>9} {'disk MB':>8}  exit",
    ]
    for r in rows:
        st = r.get("status", {})
        q = st.get("queued", "-") if isinstance(st, dict) else "-"
        disk = f"{r['disk_bytes'] / 1e6:.1f}" if "disk_bytes" in r else "-"
        lines.append(
            f"{r['name']:<10} {r['listed']:>9} {r['wall']:>7.2f} {r['cpu']:>7.2f} "
            f"{r['rss_mb']:>12.1f} {q!s:>9} {disk:>8}  {r['exit']}"
        )
    mem = [r for r in rows if r["mode"] == "memory"]
    sta = [r for r in rows if r["mode"] == "state"]
    if mem and sta:
        mw = min(r["wall"] for r in mem)
        sw = min(r["wall"] for r in sta)
        mc = min(r["cpu"] for r in mem)
        sc = min(r["cpu"] for r in sta)
        rss = max(r["rss_mb"] for r in sta)
        lines.append(
            f"best of {args.repeat}: state/memory wall {_ratio(sw, mw)}x, CPU {_ratio(sc, mc)}x; "
            f"peak RSS memory {max(r['rss_mb'] for r in mem):.1f} MB, state {rss:.1f} MB"
        )
        lines.append(
            f"bar: {'PASS' if rss <= 100 else 'FAIL'} peak RSS <= 100 MB with --state ({rss:.1f}); "
            f"{'PASS' if sw <= 2 * mw else 'FAIL'} wall <= 2x memory ({_ratio(sw, mw)}x)"
        )
    return "\n".join(lines)


def part_crawl(args: argparse.Namespace, nginx_bin: str, out: dict[str, Any]) -> str:
    n = 2000 if args.quick else args.pages
    site_root = Path(args.crawl_site_dir) / f"site-{n}-s1"
    info = cb.sitegen.build_site(site_root, n, 1)
    nginx = cb.Nginx(nginx_bin, site_root, args.nginx_core)
    work = Path(tempfile.mkdtemp(prefix="statebench-crawl-"))
    runs: list[cb.Run] = []
    try:
        for f in site_root.rglob("*.html"):
            f.read_bytes()
        url = nginx.base + "/"
        for rep in range(args.repeat):
            runs.append(measure(f"memory-{rep}", ours_cmd(url, 16), nginx, args.crawler_core, work))
            state = work / f"state-{rep}"
            cmd = ours_cmd(url, 16, "--state", str(state))
            runs.append(measure(f"state-{rep}", cmd, nginx, args.crawler_core, work))
            shutil.rmtree(state, ignore_errors=True)
        if args.scrapy:
            cb._ensure_scrapy()  # noqa: SLF001
            for name, jobdir in (("scrapy", ""), ("scrapy-jobdir", str(work / "jobdir"))):
                cmd = [PY, __file__, "_child", "scrapy", url, jobdir, "16", str(args.time_limit)]
                runs.append(measure(name, cmd, nginx, args.crawler_core, work, args.time_limit))
    finally:
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
    out["crawl"] = {"pages": n, "runs": [{**asdict(r), "rate": r.rate} for r in runs]}
    lines = [
        f"crawl: {n} pages ({info.total_bytes / n / 1000:.1f} KB average), nginx on core "
        f"{args.nginx_core}, crawler on core {args.crawler_core}, concurrency 16; "
        "`crawler crawl URL --ignore-robots -c 16 --per-host 16 --max-depth 1000 -o /dev/null "
        "-q` [--state DIR]",
        f"{'run':<14} {'pages':>6} {'GETs':>6} {'wall s':>7} {'pages/s':>8} {'CPU s':>7} "
        f"{'pages/CPU s':>11} {'peak RSS MB':>12}  note",
    ]
    for r in runs:
        note = f"load {r.load[0]:.2f}" + (f", exit {r.exit}" if r.exit else "")
        lines.append(
            f"{r.name:<14} {r.pages:>6} {r.gets:>6} {r.wall:>7.2f} {r.rate:>8.1f} {r.cpu:>7.2f} "
            f"{(r.pages / r.cpu if r.cpu else 0):>11.0f} {r.rss_mb:>12.1f}  {note}"
        )

    def best(prefix: str) -> cb.Run | None:
        got = [
            r
            for r in runs
            if r.name.startswith(prefix + "-") and r.name[len(prefix) + 1 :].isdigit()
        ]
        return max(got, key=lambda r: r.rate) if got else None

    mem, sta = best("memory"), best("state")
    if mem and sta:
        pr = sta.rate / mem.rate if mem.rate else 0
        cr = (sta.pages / sta.cpu) / (mem.pages / mem.cpu) if sta.cpu and mem.cpu else 0
        lines.append(
            f"best of {args.repeat}: --state {sta.rate:.0f} pages/s vs memory {mem.rate:.0f} "
            f"({pr:.0%}); pages per CPU s {cr:.0%} of memory's"
        )
        lines.append(
            f"bar: {'PASS' if pr >= 0.8 else 'FAIL'} --state >= 80% of memory pages/s ({pr:.0%})"
        )
    by = {r.name: r for r in runs}
    if "scrapy" in by and "scrapy-jobdir" in by and by["scrapy"].rate:
        s, j = by["scrapy"], by["scrapy-jobdir"]
        lines.append(
            f"Scrapy: JOBDIR {j.rate:.1f} pages/s vs {s.rate:.1f} without ({j.rate / s.rate:.0%}); "
            f"CPU s {j.cpu:.1f} vs {s.cpu:.1f}"
        )
    return "\n".join(lines)


def part_bytes(args: argparse.Namespace, out: dict[str, Any]) -> str:
    sizes = [int(x) for x in args.bytes_sizes.split(",")]
    rows = []
    for n in sizes:
        for backend in ("memory", "sqlite"):
            if backend == "memory" and n > args.memory_max:
                continue
            d = Path(tempfile.mkdtemp(prefix="statebench-bytes-", dir=args.site_dir))
            shutil.rmtree(d)  # a path that does not exist: a new state
            log(f"bytes: {backend} at {n:,} URLs")
            try:
                row = _run_child(["offer", backend, str(n), str(d)])
            finally:
                shutil.rmtree(d, ignore_errors=True)
            log(f"  {row}")
            rows.append(row)
    out["bytes"] = rows
    lines = [
        "bytes per URL: candidates offered straight to the backend (offer_many, chunks of 1,000; "
        "997 hosts, 60-90 character URLs), in a child process",
        f"{'backend':<8} {'URLs':>11} {'queued':>11} {'offer s':>8} {'CPU s':>7} {'us/URL':>7} "
        f"{'memory B/URL':>13} {'disk B/URL':>11} {'peak RSS MB':>12}",
    ]
    for r in rows:
        lines.append(
            f"{r['backend']:<8} {r['n']:>11,} {r['queued']:>11,} {r['offer_s']:>8.1f} "
            f"{r['offer_cpu_s']:>7.1f} {r['offer_s'] / r['n'] * 1e6:>7.2f} "
            f"{r['mem_bytes_per_url']:>13.1f} {r['disk_bytes_per_url']:>11.1f} "
            f"{r['hwm_kib'] / 1024:>12.1f}"
        )
    return "\n".join(lines)


def part_resume(args: argparse.Namespace, nginx_bin: str, out: dict[str, Any]) -> str:
    sizes = [int(x) for x in args.resume_pages.split(",")]
    n = max(sizes) * 11 // 10 + 1000
    site = build_tiny_site(Path(args.site_dir) / f"tiny-{n}", n)
    nginx = cb.Nginx(nginx_bin, site, args.nginx_core)
    work = Path(tempfile.mkdtemp(prefix="statebench-resume-"))
    rows = []
    try:
        url = nginx.base + "/"
        for k in sizes:
            state = work / f"state-{k}"
            first = measure(
                f"first-{k}",
                ours_cmd(url, 16, "--state", str(state), "--max-pages", str(k)),
                nginx,
                args.crawler_core,
                work,
            )
            opened = [_run_child(["open", str(state)]) for _ in range(args.repeat)]
            resumed = [
                measure(
                    f"resume-{k}-{rep}",
                    ours_cmd(
                        url, 16, "--state", str(state), "--max-pages", str(k + 200 * (rep + 1))
                    ),
                    nginx,
                    args.crawler_core,
                    work,
                )
                for rep in range(args.repeat)
            ]
            rows.append(
                {
                    "fetched": k,
                    "first": asdict(first),
                    "open": opened,
                    "resumed": [asdict(r) for r in resumed],
                    "disk_bytes": _du(state),
                    "status": _status(state),
                }
            )
            shutil.rmtree(state, ignore_errors=True)
    finally:
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
    out["resume"] = rows
    lines = [
        f"resume: a site of {n:,} pages of ~1 KB; `crawler crawl URL --state DIR --max-pages K`, "
        "then resumed with --max-pages K+200 (start-up, open, recovery, 200 pages, close)",
        f"{'fetched':>8} {'first wall s':>12} {'resume wall s':>14} {'resume CPU s':>13} "
        f"{'open() s':>9} {'1st lease s':>11} {'seen':>9} {'disk MB':>8}",
    ]
    for r in rows:
        wall = min(x["wall"] for x in r["resumed"])
        cpu = min(x["cpu"] for x in r["resumed"])
        op = min(x["open_s"] for x in r["open"])
        fl = min(x["first_lease_s"] for x in r["open"])
        seen = r["open"][0]["seen"]
        lines.append(
            f"{r['fetched']:>8,} {r['first']['wall']:>12.2f} {wall:>14.2f} {cpu:>13.2f} "
            f"{op:>9.3f} {fl:>11.4f} {seen:>9,} {r['disk_bytes'] / 1e6:>8.1f}"
        )
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        wa = min(x["wall"] for x in a["resumed"])
        wb = min(x["wall"] for x in b["resumed"])
        oa = min(x["open_s"] for x in a["open"])
        ob = min(x["open_s"] for x in b["open"])
        lines.append(
            f"{b['fetched']:,} vs {a['fetched']:,} pages fetched: resume wall {_ratio(wb, wa)}x, "
            f"open() {_ratio(ob, oa)}x (best of {args.repeat})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        return _child(argv[1:])
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--parts", default="frontier,crawl,bytes,resume")
    ap.add_argument("--quick", action="store_true", help="crawl: the 2,000-page site")
    ap.add_argument("--pages", type=int, default=20_000, help="crawl: site size")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each kind (best is compared)")
    ap.add_argument("--scrapy", action="store_true", help="crawl: also Scrapy with/without JOBDIR")
    ap.add_argument("--time-limit", type=float, default=900, help="seconds per Scrapy run")
    ap.add_argument("--frontier-urls", type=int, default=1_000_000)
    ap.add_argument("--bytes-sizes", default="1000000,10000000")
    ap.add_argument("--memory-max", type=int, default=10_000_000, help="bytes: memory up to N")
    ap.add_argument("--resume-pages", default="10000,100000")
    ap.add_argument("--site-dir", default="/tmp/statebench")
    ap.add_argument(
        "--crawl-site-dir",
        default="/tmp/crawlbench",
        help="crawl: where benchmarks/crawl.py builds",
    )
    ap.add_argument("--crawler-core", type=int, default=1)
    ap.add_argument("--nginx-core", type=int, default=0)
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args(argv)
    Path(args.site_dir).mkdir(parents=True, exist_ok=True)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    nginx_bin = cb._apt_install("nginx", "nginx")  # noqa: SLF001
    tree = cb.describe_tree()
    out: dict[str, Any] = {"tree": tree}
    reports = []
    for part in parts:
        t0 = time.perf_counter()
        if part == "frontier":
            reports.append(part_frontier(args, nginx_bin, out))
        elif part == "crawl":
            reports.append(part_crawl(args, nginx_bin, out))
        elif part == "bytes":
            reports.append(part_bytes(args, out))
        elif part == "resume":
            reports.append(part_resume(args, nginx_bin, out))
        else:
            raise SystemExit(f"unknown part {part!r}")
        log(f"{part}: {time.perf_counter() - t0:.0f} s")
    print(f"\n{tree}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at the end\n")
    print("\n\n".join(reports))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
