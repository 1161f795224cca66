#!/usr/bin/env python3
"""``crawler audit`` vs the plain ``crawler crawl`` (and ``crawler check``) on the crawl
benchmark's site: wall time, CPU seconds and peak RSS, as ratios to the crawl.

    python benchmarks/audit.py                  # the 20,000-page site (~2 million links)
    python benchmarks/audit.py --pages 2000     # a smaller one
    python benchmarks/audit.py --runs 2         # each command twice, the best wall kept
    python benchmarks/audit.py --only crawl crawl-state audit audit-state   # --state's cost
    python benchmarks/audit.py --pages 2000 --profile 25   # where an audit's time goes
    python benchmarks/audit.py --heads ../shared/corpus/pages   # the head facts' own cost
    python benchmarks/audit.py --root ~/.rustup/toolchains/stable-x86_64-unknown-linux-gnu\
/share/doc/rust/html --seed /std/index.html --runs 2    # the rustdoc site issue 26 names
    python benchmarks/audit.py --root DIR --seed /std/index.html --memory   # where bytes go

The site is benchmarks/crawl.py's ``standard`` one (benchmarks/crawl/sitegen.py: 30-60 KB
pages with ~100 same-host links each), built or reused under /tmp/crawlbench and served by
the same pinned nginx (benchmarks/crawl.py's ``Nginx`` and ``run_one``: pinned cores, peak RSS
from VmHWM, pages counted in nginx's log). Every command gets the same crawl flags; the
audit and the check write their report to /dev/null. Issue 26's bars: the audit at most
1.5x the crawl's wall time and 2x its peak RSS. Figures: benchmarks/AUDIT.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import crawl as crawlbench  # noqa: E402


def _commands(url: str, conc: int, states: Path) -> list[crawlbench.Run]:
    """The runs; those with ``--state`` get a new directory under ``states`` each call."""
    flags = ["--ignore-robots", "--concurrency", str(conc), "--per-host", str(conc)]
    flags += ["--max-depth", "1000", "--quiet"]
    py = sys.executable
    n = len(list(states.glob("*"))) if states.exists() else 0
    crawl = [py, "-m", "crawler", "crawl", url, *flags, "-o", os.devnull]
    audit = [py, "-m", "crawler", "audit", url, *flags, "-o", os.devnull]
    return [
        crawlbench.Run("crawl", crawl),
        crawlbench.Run("crawl-state", [*crawl, "--state", str(states / f"crawl-{n}")]),
        crawlbench.Run("audit", audit),
        # the crawl's state and the audit's link graph in SQLite (crawler/audit/diskgraph.py)
        crawlbench.Run("audit-state", [*audit, "--state", str(states / f"audit-{n}")]),
        crawlbench.Run(
            "check",
            [py, "-m", "crawler", "check", url, *flags, "--links-only", "-o", os.devnull],
        ),
    ]


def _memory(url: str, conc: int, top: int) -> None:
    """The audit of ``url`` in this process under tracemalloc: the ``top`` lines holding the
    most bytes when the crawl is over (before the report), then the report's own peak."""
    import tracemalloc  # noqa: PLC0415

    from crawler.audit import analysis  # noqa: PLC0415
    from crawler.audit.api import audit_sync  # noqa: PLC0415

    build = analysis.build_report

    def traced(auditor: Any, graph: str | None = None) -> Any:
        snap = tracemalloc.take_snapshot()
        held, _ = tracemalloc.get_traced_memory()
        print(f"before the report: {held / 1e6:.1f} MB traced; by line:")
        for stat in snap.statistics("lineno")[:top]:
            print(f"  {stat.size / 1e6:8.1f} MB {stat.count:>9} blocks  {stat.traceback}")
        tracemalloc.reset_peak()
        report = build(auditor, graph)
        _, peak = tracemalloc.get_traced_memory()
        print(f"the report's peak: {peak / 1e6:.1f} MB traced (+{(peak - held) / 1e6:.1f})")
        return report

    analysis.build_report = traced
    opts = {"ignore_robots": True, "concurrency": conc, "per_host": conc, "max_depth": 1000}
    tracemalloc.start()
    try:
        report = audit_sync(url, **opts)
    finally:
        analysis.build_report = build
        tracemalloc.stop()
    print(f"audit: {report.stats.pages} pages, {report.stats.links} links")


def _profile(url: str, conc: int, top: int) -> None:
    """The audit of ``url`` in this process under cProfile: its ``top`` functions by own
    time, then by cumulative time (the profiler slows it: read the shares, not the times)."""
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415
    import time  # noqa: PLC0415

    from crawler.audit.api import audit_sync  # noqa: PLC0415

    opts = {"ignore_robots": True, "concurrency": conc, "per_host": conc, "max_depth": 1000}
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    report = audit_sync(url, **opts)
    prof.disable()
    print(f"audit: {report.stats.pages} pages")
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def _heads(corpus: Path, repeat: int) -> None:
    """The head facts' cost on real pages, CPU seconds (best of ``repeat``): the compiled and
    pure extractors without and with ``head_facts``, and the html.parser scan the audit used
    before (``read_head`` over the first 64 KiB, decoded as the audit decoded it)."""
    import time  # noqa: PLC0415

    from crawler.audit.head import read_head  # noqa: PLC0415
    from crawler.extract import LinkExtractorC, LinkExtractorPy  # noqa: PLC0415

    pages = [p.read_bytes() for p in sorted(corpus.rglob("*.html"))]
    if not pages:
        raise SystemExit(f"no pages in {corpus}")

    def extract(impl: Any, facts: bool) -> None:
        for data in pages:
            ex = impl("https://example.org/", None, head_facts=facts)
            ex.feed(data)
            ex.close()

    def html_parser() -> None:
        for data in pages:
            read_head(data[:65536].decode("utf-8", "replace"))

    runs: list[tuple[str, Any]] = []
    for name, impl in (("c", LinkExtractorC), ("py", LinkExtractorPy)):
        if impl is not None:
            runs.append((f"extractor {name}", lambda i=impl: extract(i, False)))
            runs.append((f"extractor {name} + head_facts", lambda i=impl: extract(i, True)))
    runs.append(("html.parser read_head (64 KiB)", html_parser))
    mb = sum(map(len, pages)) / 1e6
    print(f"{len(pages)} pages, {mb:.1f} MB; CPU s, best of {repeat}")
    print(f"{'':34} {'s':>7} {'us/page':>9}")
    for name, fn in runs:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.process_time()
            fn()
            best = min(best, time.process_time() - t0)
        print(f"{name:34} {best:>7.3f} {best / len(pages) * 1e6:>9.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--site-seed", type=int, default=1, help="the generated site's seed")
    ap.add_argument("--site-dir", default="/tmp/crawlbench")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=900.0)
    ap.add_argument("--only", nargs="*", default=["crawl", "audit", "check"])
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="instead: an in-process audit under cProfile, its N costliest functions",
    )
    ap.add_argument(
        "--memory",
        type=int,
        nargs="?",
        const=25,
        default=0,
        metavar="N",
        help="instead: an in-process audit under tracemalloc, its N largest lines",
    )
    ap.add_argument("--root", help="serve this directory instead of the generated site")
    ap.add_argument("--seed", default="/", help="the seed's path on the site (with --root)")
    ap.add_argument(
        "--heads",
        metavar="DIR",
        help="instead: the head facts' cost on the pages under DIR (e.g. ../shared/corpus/pages)",
    )
    args = ap.parse_args(argv)
    if args.heads:
        _heads(Path(args.heads), max(args.runs, 3))
        return 0
    if args.root:
        root = Path(args.root).expanduser()
        crawlbench.log(f"site {root}, seed {args.seed}")
    else:
        root, total, _ = crawlbench.build(
            "standard", args.pages, args.site_seed, Path(args.site_dir)
        )
        crawlbench.log(f"site {root}: {args.pages} pages, {total / 1e6:.0f} MB")
    nginx_bin = crawlbench._apt_install("nginx", "nginx")
    nginx = crawlbench.Nginx(nginx_bin, root, core=0)
    seed_url = nginx.base + (args.seed if args.root else "/")
    if args.profile or args.memory:
        try:
            if args.profile:
                _profile(seed_url, args.concurrency, args.profile)
            else:
                _memory(seed_url, args.concurrency, args.memory)
        finally:
            nginx.stop()
        return 0
    best: dict[str, crawlbench.Run] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="auditbench-") as tmp:
            for _ in range(args.runs):
                for run in _commands(seed_url, args.concurrency, Path(tmp, "states")):
                    if run.name not in args.only:
                        continue
                    done = crawlbench.run_one(run, nginx, 1, args.time_limit, Path(tmp))
                    crawlbench.log(
                        f"{run.name}: {done.pages} pages, {done.wall:.1f} s wall, "
                        f"{done.cpu:.1f} CPU s, {done.rss_mb:.0f} MB peak RSS, exit {done.exit}"
                    )
                    if run.name not in best or done.wall < best[run.name].wall:
                        best[run.name] = done
    finally:
        nginx.stop()
    base = best.get("crawl")
    site = f"{root} {args.seed}" if args.root else f"{args.pages} pages"
    print(f"\n{site}, concurrency {args.concurrency}, best of {args.runs}")
    print(
        f"{'command':11} {'pages':>6} {'wall s':>8} {'CPU s':>7} {'RSS MB':>7}"
        f" {'wall x':>7} {'RSS x':>6}"
    )
    for name, run in best.items():
        wall_x = run.wall / base.wall if base else float("nan")
        rss_x = run.rss_mb / base.rss_mb if base else float("nan")
        print(
            f"{name:11} {run.pages:>6} {run.wall:>8.1f} {run.cpu:>7.1f} {run.rss_mb:>7.0f}"
            f" {wall_x:>7.2f} {rss_x:>6.2f}"
        )
    audit = best.get("audit")
    if base and audit:
        ok_wall = audit.wall <= 1.5 * base.wall
        ok_rss = audit.rss_mb <= 2 * base.rss_mb
        print(
            f"bars (issue 26): wall <= 1.5x crawl: {'yes' if ok_wall else 'NO'}"
            f" ({audit.wall / base.wall:.2f}x); peak RSS <= 2x crawl:"
            f" {'yes' if ok_rss else 'NO'} ({audit.rss_mb / base.rss_mb:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
