#!/usr/bin/env python3
"""``crawler audit`` on a generated site of a million pages: wall, CPU and peak RSS beside
the plain crawl of the same site (issue 26: "a benchmark with a generated 1M-page site: RSS
figure recorded").

    python benchmarks/audit_million.py                 # 1,111,111 pages (6 levels), ~23M links
    python benchmarks/audit_million.py --levels 4      # 11,111 pages: a quick look
    python benchmarks/audit_million.py --only audit audit-state

The site is made by nginx from the URL alone (no file on disk; ``return 200`` with the
captures of a regex location): ``/`` links ``/p/0`` .. ``/p/9``; a page ``/p/D`` (D a string
of 1 to ``levels`` digits) links home, its ten siblings (``/p/`` + D's parent + 0..9) and,
below the last level, its ten children (``/p/D0`` .. ``/p/D9``). So every page but the home
page has 10 inlinks (its parent and its nine siblings), its click depth is its number of
digits, and there is nothing to report: no finding is planted (``--max-click-depth`` is the
number of levels). What is measured is what a large graph costs. nginx and the crawler are
each pinned to one core and measured as benchmarks/crawl.py's ``run_one`` does (peak RSS
from VmHWM, pages from nginx's log). Figures: benchmarks/AUDIT.md.

Runs: ``crawl`` (``crawler crawl``), ``crawl-state`` (``crawler crawl --state DIR``: the
crawl's seen set and frontier in SQLite), ``audit`` (``crawler audit``, the graph in memory),
``audit-state`` (``crawler audit --state DIR``: the crawl state and the audit's link graph in
SQLite, crawler/audit/diskgraph.py).

``--trace``: instead, one audit in this process (pinned to core 1), with the RSS and its peak
(VmRSS, VmHWM: the peak reset after each reading through /proc/self/clear_refs) at the
crawl's end and after each step of the report (``build_report``), and the CPU seconds so
far: where the audit's memory goes after the crawl. ``--trace --state``: that audit with
``--state DIR`` (a new directory), the graph on disk.
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

_CONF = """
daemon off;
@@USER@@
master_process on;
worker_processes 1;
pid @@TMP@@/nginx.pid;
error_log @@TMP@@/error.log warn;
events {{ worker_connections 1024; accept_mutex off; }}
http {{
    log_format pages '$request_method $status $request_uri';
    access_log @@TMP@@/pages.log pages buffer=256k flush=1s;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 100000000;
    server_tokens off;
    default_type text/html;
    client_body_temp_path @@TMP@@/client_body;
    proxy_temp_path @@TMP@@/proxy;
    fastcgi_temp_path @@TMP@@/fastcgi;
    uwsgi_temp_path @@TMP@@/uwsgi;
    scgi_temp_path @@TMP@@/scgi;
    server {{
        listen 127.0.0.1:@@PORT@@ reuseport;
        location = / {{ return 200 '{home}'; }}
        location ~ "^/p/(?<pre>\\d{{0,{inner}}})(?<last>\\d)$" {{ return 200 '{inner_page}'; }}
        location ~ "^/p/(?<pre>\\d{{{inner_plus}}})(?<last>\\d)$" {{ return 200 '{leaf_page}'; }}
        location = /__nginx_status {{ access_log off; stub_status; }}
    }}
}}
"""


def _page(title: str, links: list[tuple[str, str]]) -> str:
    body = "\n".join(f'<a href="{href}">{text}</a>' for href, text in links)
    return (
        f"<!doctype html>\n<html><head><title>{title}</title></head><body>\n{body}\n"
        "</body></html>\n"
    )


def site_conf(levels: int) -> str:
    """The nginx config of the generated site (``levels`` >= 2), with crawl.py's ``Nginx``
    placeholders (@@TMP@@, @@PORT@@, @@USER@@) left for it to fill."""
    home = _page("home", [(f"/p/{d}", str(d)) for d in range(10)])
    siblings = [(f"/p/${{pre}}{d}", f"sibling {d}") for d in range(10)]
    children = [(f"/p/$pre${{last}}{d}", f"child {d}") for d in range(10)]
    inner = _page("$pre$last", [("/", "home"), *siblings, *children])
    leaf = _page("$pre$last", [("/", "home"), *siblings])
    return _CONF.format(
        home=home,
        inner=levels - 2,
        inner_page=inner,
        inner_plus=levels - 1,
        leaf_page=leaf,
    )


def _vm() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process in MB; the peak is reset for the next reading."""
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) // 1024
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return found["VmRSS"], found["VmHWM"]


def trace(url: str, levels: int, concurrency: int, state: str | None = None) -> None:
    """One audit in process, the RSS read at each step of its report (see ``--trace``)."""
    import time  # noqa: PLC0415

    sys.path.insert(0, str(HERE.parent))
    from crawler.audit import analysis  # noqa: PLC0415
    from crawler.audit.api import audit_sync  # noqa: PLC0415

    def mark(step: str) -> None:
        rss, peak = _vm()
        crawlbench.log(
            f"{step:18} RSS {rss:6} MB, peak since the last step {peak:6} MB, "
            f"{time.process_time():7.1f} CPU s"
        )

    def step(name: str) -> None:
        method = getattr(analysis._Analysis, name)

        def traced(self: analysis._Analysis) -> None:
            method(self)
            mark(name)

        setattr(analysis._Analysis, name, traced)

    for name in ("completeness", "walk", "orphans", "redirects", "canonicals", "hreflang",
                 "pages", "places"):  # fmt: skip
        step(name)
    build = analysis.build_report

    def traced_build(auditor: Any, graph: str | None = None) -> Any:
        mark("the crawl's end")
        report = build(auditor, graph)
        mark("the report")
        return report

    analysis.build_report = traced_build
    os.sched_setaffinity(0, {1})
    _vm()
    report = audit_sync(url, ignore_robots=True, concurrency=concurrency, per_host=concurrency,
                        max_depth=1000, max_click_depth=levels, state=state)  # fmt: skip
    crawlbench.log(
        f"{report.stats.pages:,} pages, {report.stats.edges:,} edges, "
        f"{len(report.findings)} findings, click depths {report.stats.depth}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--levels", type=int, default=6, help="digits of the deepest page (2..7)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=7200.0)
    ap.add_argument("--only", nargs="*", default=["crawl", "audit", "audit-state"])
    ap.add_argument("--trace", action="store_true", help="one audit in process, traced")
    ap.add_argument("--state", action="store_true", help="with --trace: the audit with --state")
    args = ap.parse_args(argv)
    if not 2 <= args.levels <= 7:
        raise SystemExit("--levels: 2 to 7")
    pages = sum(10**k for k in range(args.levels + 1))
    nginx = crawlbench.Nginx(
        crawlbench._apt_install("nginx", "nginx"), Path("/"), core=0, conf=site_conf(args.levels)
    )
    url = nginx.base + "/"
    if args.trace:
        try:
            with tempfile.TemporaryDirectory(prefix="auditmillion-") as tmp:
                state = str(Path(tmp, "state")) if args.state else None
                trace(url, args.levels, args.concurrency, state)
        finally:
            nginx.stop()
        return 0
    py = sys.executable
    flags = ["--ignore-robots", "--concurrency", str(args.concurrency), "--per-host",
             str(args.concurrency), "--max-depth", "1000", "--quiet", "-o", os.devnull]  # fmt: skip
    done: list[crawlbench.Run] = []
    try:
        with tempfile.TemporaryDirectory(prefix="auditmillion-") as tmp:
            audit = [py, "-m", "crawler", "audit", url, *flags,
                     "--max-click-depth", str(args.levels)]  # fmt: skip
            runs = [
                crawlbench.Run("crawl", [py, "-m", "crawler", "crawl", url, *flags]),
                crawlbench.Run(
                    "crawl-state",
                    [py, "-m", "crawler", "crawl", url, *flags, "--state", str(Path(tmp, "cs"))],
                ),
                crawlbench.Run("audit", audit),
                crawlbench.Run("audit-state", [*audit, "--state", str(Path(tmp, "state"))]),
            ]
            for run in runs:
                if run.name not in args.only:
                    continue
                r = crawlbench.run_one(run, nginx, 1, args.time_limit, Path(tmp))
                crawlbench.log(
                    f"{run.name}: {r.pages} pages, {r.wall:.1f} s wall, {r.cpu:.1f} CPU s, "
                    f"{r.rss_mb:.0f} MB peak RSS, exit {r.exit}, load {r.load[0]:.1f}"
                )
                done.append(r)
    finally:
        nginx.stop()
    links = 10 + (pages - 1) * 11 + sum(10**k for k in range(1, args.levels)) * 10
    print(f"\n{pages:,} pages, {links:,} links, concurrency {args.concurrency}")
    base = next((r for r in done if r.name == "crawl"), None)
    print(f"{'run':12} {'pages':>9} {'wall s':>8} {'CPU s':>8} {'RSS MB':>7} {'x wall':>7}"
          f" {'x RSS':>6} {'bytes/link':>10}")  # fmt: skip
    for r in done:
        wall_x = r.wall / base.wall if base else float("nan")
        rss_x = r.rss_mb / base.rss_mb if base else float("nan")
        print(
            f"{r.name:12} {r.pages:>9,} {r.wall:>8.1f} {r.cpu:>8.1f} {r.rss_mb:>7.0f}"
            f" {wall_x:>7.2f} {rss_x:>6.2f} {r.rss_mb * 2**20 / links:>10.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
