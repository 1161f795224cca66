#!/usr/bin/env python3
"""Whole crawls with a browser: ``--render never|auto|always`` vs crawlee's crawlers (issue 24).

    python benchmarks/render_crawl.py --crawlee /tmp/crawlee/bin/python   # side by side
    python benchmarks/render_crawl.py --pages 100 --runs 1                  # ours only, quick

The local client-rendered site of the tests (``python -m tests.render_site``, its own process
on 127.0.0.1) serves three sites of ``--pages`` pages sharing one link graph (page ``i`` links
to ``2i+1`` and ``2i+2``): ``/spa/i`` (every page an empty ``<div id="root">`` whose links a
script writes after a ``fetch()`` of JSON), ``/ssr/i`` (the same links in the HTML) and
``/mix/i`` (client-rendered when ``i % 10 == 0``, the rest static). Each crawl starts at page
0 and must reach every page of its site (following links: what a crawl costs, not a render).

Contenders, each a child process measured the same way:

* ours: ``crawler crawl SEED --render MODE -c C --per-host C --render-concurrency C``;
* crawlee's ``PlaywrightCrawler`` (PyPI ``crawlee[playwright]``, in its own venv, Debian's
  Chromium through ``executable_path``, the same flags), its handler waiting for Playwright's
  ``networkidle`` (no request for 0.5 s: Playwright's generic wait, which the links made
  after a ``fetch()`` need; ours settles by crawler/render/settle.py's rule) then
  ``enqueue_links``;
* crawlee's ``AdaptivePlaywrightCrawler`` (parsel for the static pass), the same handler
  (the wait only when it runs in the browser): it learns per URL whether HTTP is enough.

Figures: pages reached (of the site's), pages/s, CPU a page (the child's and all its reaped
descendants': driver, every Chromium process; ``wait4``), peak memory of the process tree
(PSS and RSS summed over /proc, sampled every 0.2 s). The bars (issue 24): ``always`` at least
2x crawlee's PlaywrightCrawler's pages/s on /spa/; ``auto`` on /mix/ (10% need a browser) at
most 1.5x the plain crawl of /ssr/ (the same site, links in the HTML). Runs alternate
(``--runs`` rounds of every contender); medians. The load average is printed: other work on
the machine slows every contender.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from render import FLAGS, run_measured  # noqa: E402

CRAWLEE = r"""
import asyncio, json, sys, time
from crawlee import ConcurrencySettings
from crawlee.crawlers import (
    AdaptivePlaywrightCrawler, AdaptivePlaywrightCrawlingContext,
    PlaywrightCrawler, PlaywrightCrawlingContext,
)

kind, seed, concurrency, flags = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
launch = {"executable_path": "/usr/bin/chromium", "args": flags}
settings = ConcurrencySettings(
    min_concurrency=concurrency, max_concurrency=concurrency, desired_concurrency=concurrency
)
pages, rendered = set(), [0]

async def main():
    if kind == "playwright":
        crawler = PlaywrightCrawler(
            headless=True, browser_type="chromium", browser_launch_options=launch,
            concurrency_settings=settings, max_request_retries=0, configure_logging=False,
        )

        @crawler.router.default_handler
        async def handler(context: PlaywrightCrawlingContext) -> None:
            await context.page.wait_for_load_state("networkidle")
            pages.add(context.request.url)
            rendered[0] += 1
            await context.enqueue_links(strategy="same-origin")
    else:
        crawler = AdaptivePlaywrightCrawler.with_parsel_static_parser(
            playwright_crawler_specific_kwargs={
                "headless": True, "browser_type": "chromium", "browser_launch_options": launch,
            },
            concurrency_settings=settings, max_request_retries=0, configure_logging=False,
        )

        @crawler.router.default_handler
        async def handler(context: AdaptivePlaywrightCrawlingContext) -> None:
            try:
                page = context.page
            except Exception:
                page = None  # the static pass: no browser
            if page is not None:
                await page.wait_for_load_state("networkidle")
                rendered[0] += 1
            pages.add(context.request.url)
            await context.enqueue_links(strategy="same-origin")

    started = time.monotonic()
    await crawler.run([seed])
    wall = time.monotonic() - started
    print(json.dumps({"wall": wall, "pages": sorted(pages), "rendered": rendered[0]}), flush=True)

asyncio.run(main())
"""


def ours_argv(seed: str, mode: str, concurrency: int, out: str) -> list[str]:
    return [
        sys.executable, "-m", "crawler", "crawl", seed, "--render", mode,
        "-c", str(concurrency), "--per-host", str(concurrency),
        "--render-concurrency", str(concurrency), "--max-depth", "1000",
        "-f", "jsonl", "-o", out, "-q",
    ]  # fmt: skip


def pages_of_ours(jsonl: Path, prefix: str) -> tuple[int, int]:
    """(pages of the site fetched with status 200, pages rendered) from a jsonl output."""
    reached = rendered = 0
    for line in jsonl.read_text().splitlines():
        record = json.loads(line)
        url = record.get("url", "")
        if prefix in url and record.get("status") == 200:
            reached += 1
            rendered += bool(record.get("rendered"))
    return reached, rendered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300, help="pages of each site")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3, help="rounds of every contender")
    parser.add_argument("--crawlee", metavar="PYTHON", help="a python with crawlee[playwright]")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.render_site", "--pages", str(args.pages)],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    try:
        assert server.stdout is not None
        base = json.loads(server.stdout.readline())["site"]
        c = args.concurrency
        contenders: list[tuple[str, str, str]] = [
            ("ours never", "ssr", "never"),
            ("ours auto", "ssr", "auto"),
            ("ours never", "mix", "never"),
            ("ours auto", "mix", "auto"),
            ("ours always", "mix", "always"),
            ("ours never", "spa", "never"),
            ("ours auto", "spa", "auto"),
            ("ours always", "spa", "always"),
        ]
        if args.crawlee:
            contenders += [
                ("crawlee Adaptive", "ssr", "adaptive"),
                ("crawlee Adaptive", "mix", "adaptive"),
                ("crawlee Playwright", "mix", "playwright"),
                ("crawlee Adaptive", "spa", "adaptive"),
                ("crawlee Playwright", "spa", "playwright"),
            ]
        rows: dict[tuple[str, str], list[dict[str, float]]] = {}
        load_before = os.getloadavg()
        for _ in range(args.runs):
            for name, site, mode in contenders:
                seed = f"{base}/{site}/0"
                with tempfile.TemporaryDirectory() as tmp:
                    out = Path(tmp) / "out.jsonl"
                    if name.startswith("ours"):
                        argv = ours_argv(seed, mode, c, str(out))
                    else:
                        argv = [args.crawlee, "-c", CRAWLEE, mode, seed, str(c), *FLAGS]
                    wall, cpu, pss, rss, stdout = run_measured(argv)
                    if name.startswith("ours"):
                        reached, rendered = pages_of_ours(out, f"/{site}/")
                    else:
                        result = json.loads(stdout.strip().splitlines()[-1])
                        reached = sum(f"/{site}/" in u for u in result["pages"])
                        rendered = result["rendered"]
                row = {
                    "wall": wall, "cpu": cpu, "pss": pss / 1024, "rss": rss / 1024,
                    "reached": reached, "rendered": rendered,
                }  # fmt: skip
                rows.setdefault((name, site), []).append(row)
                _print(name, site, row, args.pages)
        load_after = os.getloadavg()
        print(f"\nmedians of {args.runs} run(s), {args.pages} pages a site, concurrency {c}")
        medians = {key: _median(runs) for key, runs in rows.items()}
        for (name, site), row in medians.items():
            _print(name, site, row, args.pages)
        _bars(medians, args.pages)
        print(f"load average before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {
                        "rows": [
                            {"name": n, "site": s, **r}
                            for (n, s), runs in rows.items()
                            for r in runs
                        ],
                        "load": [load_before, load_after],
                    },
                    indent=1,
                )
            )
    finally:
        server.terminate()
        server.wait()
    return 0


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _print(name: str, site: str, r: dict[str, float], pages: int) -> None:
    rate = r["reached"] / r["wall"] if r["wall"] else 0.0
    per_page = r["cpu"] / r["reached"] * 1000 if r["reached"] else float("nan")
    print(
        f"{name:<20} /{site}/  reached {r['reached']:>5.0f}/{pages}  rendered {r['rendered']:>5.0f}"
        f"  {r['wall']:7.2f} s  {rate:7.1f} pages/s  {per_page:7.1f} ms CPU/page"
        f"  peak PSS {r['pss']:6.0f} MB  RSS {r['rss']:6.0f} MB",
        flush=True,
    )


def _bars(m: dict[tuple[str, str], dict[str, float]], pages: int) -> None:
    def rate(key: tuple[str, str]) -> float:
        r = m[key]
        return r["reached"] / r["wall"]

    plain, auto_mix = m[("ours never", "ssr")], m[("ours auto", "mix")]
    print(
        f"auto on /mix/ vs never on /ssr/: wall {auto_mix['wall'] / plain['wall']:.2f}x,"
        f" CPU {auto_mix['cpu'] / plain['cpu']:.2f}x (bar: at most 1.5x)"
    )
    auto_ssr = m[("ours auto", "ssr")]
    print(
        f"auto on /ssr/ vs never: wall {auto_ssr['wall'] / plain['wall']:.2f}x,"
        f" CPU {auto_ssr['cpu'] / plain['cpu']:.2f}x, rendered {auto_ssr['rendered']:.0f}"
    )
    if ("crawlee Playwright", "spa") in m:
        ratio = rate(("ours always", "spa")) / rate(("crawlee Playwright", "spa"))
        print(f"always vs crawlee PlaywrightCrawler on /spa/: {ratio:.2f}x pages/s (bar: >= 2x)")
        for site in ("mix", "spa"):
            ours, theirs = m[("ours auto", site)], m[("crawlee Adaptive", site)]
            speed = rate(("ours auto", site)) / rate(("crawlee Adaptive", site))
            print(
                f"auto vs crawlee Adaptive on /{site}/: {speed:.2f}x pages/s,"
                f" reached {ours['reached']:.0f} vs {theirs['reached']:.0f} of {pages},"
                f" rendered {ours['rendered']:.0f} vs {theirs['rendered']:.0f}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
