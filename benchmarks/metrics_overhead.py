#!/usr/bin/env python3
"""What ``--metrics-port`` costs: the crawl benchmark's site crawled with and without it.

    python benchmarks/metrics_overhead.py               # 2,000-page site, 3 runs each, alternating
    python benchmarks/metrics_overhead.py --runs 5 --pages 20000
    python benchmarks/metrics_overhead.py --micro-only  # only the per-call cost of the hot path
    python benchmarks/metrics_overhead.py --valgrind --runs 3 --scrape-interval 100
                                                        # instructions (callgrind), not CPU s
    PY=$(python -c 'import sys; print(sys.executable)')   # the interpreter, not pyenv's shim
    valgrind --tool=callgrind $PY benchmarks/metrics_overhead.py --loop 100000   # minus
    valgrind --tool=callgrind $PY benchmarks/metrics_overhead.py --loop 0        # = 1e5 pages

Uses benchmarks/crawl.py's pieces: the same generated site (30-60 KB pages, ~100 links
each, under /tmp/crawlbench), nginx pinned to core 0, ``crawler crawl`` pinned to core 1
(``--ignore-robots --concurrency 16 --per-host 16 --output /dev/null --quiet``), CPU seconds
(user+sys) from os.wait4, pages from nginx's log. Runs alternate off/on so that drift in the
machine's load hits both alike. With metrics on, this script scrapes /metrics every
``--scrape-interval`` seconds during the run (a pessimistic Prometheus: its default is 15 s)
and checks the last scrape's page count against nginx's.

CPU seconds on a shared 2-core machine move by 20% between runs; ``--valgrind`` runs each
crawl under ``valgrind --tool=callgrind`` and reports the instructions it executed, which move
far less (about 50x slower, so use the 2,000-page site).

Also measures the hot path alone: ``Metrics.on_response`` and ``Metrics.on_tally`` per call
(timeit, best of 5), the two calls the crawl makes per fetch and per page.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import threading
import timeit
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from prometheus_client import generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from crawler.core.admission import Tally  # noqa: E402
from crawler.http.response import Response  # noqa: E402
from crawler.output.metrics import Metrics  # noqa: E402


def _load_crawlbench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("crawlbench", HERE / "crawl.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up by name
    spec.loader.exec_module(mod)
    return mod


def micro() -> dict[str, float]:
    """Nanoseconds per call of the two hot-path methods."""
    m = Metrics()
    ok = Response("http://h/p", status=200, bytes=45_000, elapsed_ms=12.5)
    bad = Response("http://h/x", status=404, error="http_404", bytes=120, elapsed_ms=3.0)
    t = Tally()
    t.links_found, t.links_new, t.out_of_scope = 100, 3, 5
    n = 200_000
    out = {}
    for name, fn in (
        ("on_response (200)", lambda: m.on_response(ok)),
        ("on_response (404)", lambda: m.on_response(bad)),
        ("on_tally", lambda: m.on_tally(t)),
        ("empty call (baseline)", lambda: None),
        ("one scrape (exposition)", lambda: generate_latest(m.registry)),
    ):
        number = n // 100 if name.startswith("one scrape") else n
        best = min(timeit.repeat(fn, number=number, repeat=5))
        out[name] = best / number * 1e9
    return out


def loop(n: int) -> None:
    """One page's two hot-path calls, n times: a fixed workload for callgrind differences."""
    m = Metrics()
    ok = Response("http://h/p", status=200, bytes=45_000, elapsed_ms=12.5)
    t = Tally()
    t.links_found, t.links_new, t.out_of_scope = 100, 3, 5
    on_response, on_tally = m.on_response, m.on_tally
    for _ in range(n):
        on_response(ok)
        on_tally(t)


class Scraper(threading.Thread):
    """Scrapes a /metrics URL every ``interval`` s until stopped; keeps the last body."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.stopping = threading.Event()
        self.count = 0
        self.last = ""

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    self.last = r.read().decode()
                    self.count += 1
            except OSError:
                pass  # not listening yet, or already closed


def pages_in(text: str) -> float | None:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "crawler_pages_total":
                return s.value
    return None


def instructions(err: Path) -> float:
    """The instruction count callgrind printed ("==PID== Collected : N") in a stderr file."""
    for line in err.read_text(errors="replace").splitlines():
        if "Collected :" in line:
            return float(line.rsplit(":", 1)[1])
    raise SystemExit(f"no callgrind summary in {err}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=2000, help="site size (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    ap.add_argument("--time-limit", type=float, default=None, help="s (default 300, 1200)")
    ap.add_argument("--site-dir", default="/tmp/crawlbench")
    ap.add_argument("--micro-only", action="store_true")
    ap.add_argument("--valgrind", action="store_true", help="count instructions (callgrind)")
    ap.add_argument(
        "--loop", type=int, default=None, help="only N x (on_response + on_tally), then exit"
    )
    args = ap.parse_args(argv)
    if args.time_limit is None:
        args.time_limit = 1200.0 if args.valgrind else 300.0

    if args.loop is not None:
        loop(args.loop)
        return 0
    print("hot path, ns per call (best of 5 x 200,000; a scrape: x 2,000):")
    for name, ns in micro().items():
        print(f"  {name:24s} {ns:7.0f}")
    if args.micro_only:
        return 0

    cb = _load_crawlbench()
    site_root = Path(args.site_dir) / f"site-{args.pages}-s{args.seed}"
    cb.sitegen.build_site(site_root, args.pages, args.seed)
    for f in site_root.rglob("*.html"):
        f.read_bytes()  # warm the page cache
    nginx = cb.Nginx(cb._apt_install("nginx", "nginx"), site_root, 0)
    workdir = Path(tempfile.mkdtemp(prefix="metricsbench-"))
    results: dict[str, list[tuple[float, float, int]]] = {"off": [], "on": []}
    unit = "G instructions" if args.valgrind else "CPU s"
    try:
        url = nginx.base + "/"
        base = [
            sys.executable, "-m", "crawler", "crawl", url, "--ignore-robots",
            "--concurrency", str(args.concurrency), "--per-host", str(args.concurrency),
            "--max-depth", "1000", "--output", "/dev/null", "--quiet",
        ]  # fmt: skip
        for i in range(args.runs):
            for mode in ("off", "on"):
                cmd = list(base)
                if args.valgrind:
                    out = workdir / f"callgrind.{mode}{i}"
                    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd]
                scraper = None
                if mode == "on":
                    port = cb._free_port()
                    cmd += ["--metrics-port", str(port)]
                    scraper = Scraper(f"http://127.0.0.1:{port}/metrics", args.scrape_interval)
                    scraper.start()
                run = cb.Run(f"{mode}{i}", cmd)
                cb.run_one(run, nginx, 1, args.time_limit, workdir)
                if args.valgrind:
                    run.cpu = instructions(workdir / f"{run.name}.err") / 1e9
                note = ""
                if scraper is not None:
                    scraper.stopping.set()
                    scraper.join()
                    last = pages_in(scraper.last) if scraper.last else None
                    note = f", {scraper.count} scrapes, last says {last} pages"
                print(
                    f"  {mode:3s} run {i}: {run.pages} pages, {run.cpu:.3f} {unit}, "
                    f"{run.wall:.2f} s wall, exit {run.exit}{note}",
                    flush=True,
                )
                if run.exit == 0 and not run.timed_out and run.pages == args.pages:
                    results[mode].append((run.cpu, run.wall, run.pages))
                else:
                    print(f"  (run {mode}{i} left out: not a complete crawl)", flush=True)
    finally:
        nginx.stop()
    print(f"\n{args.pages}-page site, {args.runs} runs each (median):")
    med = {}
    for mode, rows in results.items():
        if not rows:
            print(f"  metrics {mode}: no complete run")
            return 1
        cpu = statistics.median(r[0] for r in rows)
        wall = statistics.median(r[1] for r in rows)
        pages = statistics.median(r[2] for r in rows)
        med[mode] = cpu
        print(
            f"  metrics {mode:3s}: {cpu:.3f} {unit}, {wall:.2f} s wall, {pages:.0f} pages, "
            f"{pages / wall:.0f} pages/s; runs: " + ", ".join(f"{r[0]:.3f}" for r in rows)
        )
    diff = med["on"] - med["off"]
    print(f"  difference: {diff:+.3f} {unit} ({diff / med['off'] * 100:+.2f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
