#!/usr/bin/env python3
"""The least a Chromium render can cost: CPU a navigation to a page with nothing to do (issue 24).

    python benchmarks/render_floor.py                 # 100 navigations a way
    python benchmarks/render_floor.py --navigations 300

Issue 24 asks that ``--render auto`` on a site where one page in ten needs a browser cost at
most 1.5x the plain crawl of the same site with its links in the HTML. Whatever decides which
pages to render, that bar holds only if one render costs at most about five static pages
(0.1 x render <= 0.5 x static). This measures the floor of a render, not the crawler's: the
crawl's own Chromium (crawler/render/launch.py: the same binary and flags), one tab kept open,
navigated again and again to a 60-byte page with one link and no script, served by a local
server (127.0.0.1), in the cheapest ways Playwright offers:

* ``goto`` waiting for ``load``, ``domcontentloaded``, or only ``commit`` (the response is in:
  nothing rendered yet);
* ``set_content``: the document handed over as a string, no request at all.

CPU is counted from /proc for every process below this one (Playwright's driver and every
Chromium process), split into the browser's and the driver's, plus this process's own.
Compare it with a static page's cost in the crawl (benchmarks/RENDER.md: 0.9 ms of CPU a page
on the render benchmark's site, about 0.2 ms on the documentation sites).
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import resource
import socketserver
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawler.render.launch import find_chromium, launch, start_playwright  # noqa: E402

BODY = b"<!doctype html><title>t</title><a href='/next'>next</a>"
TICK = os.sysconf("SC_CLK_TCK")


class _Page(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802  (the standard library's name)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        try:
            self.wfile.write(BODY)
        except OSError:
            pass  # a navigation that moved on before the body was read

    def log_message(self, *args: object) -> None:
        pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a connection Chromium dropped when the navigation moved on


def _descendants_cpu(root: int) -> tuple[float, float]:
    """CPU seconds (user+system) of every live process below ``root``: (Chromium's, others')."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    name: dict[int, bytes] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                name[pid] = f.read(4096)
        except OSError:
            continue
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
    browser = other = 0.0
    for pid, seconds in cpu.items():
        up, seen = parent.get(pid), 0
        while up is not None and up != root and seen < 64:
            up, seen = parent.get(up), seen + 1
        if up != root:
            continue
        if b"chrom" in name[pid]:
            browser += seconds
        else:
            other += seconds
    return browser, other


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(navigations: int) -> None:
    server = _Server(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    playwright = await start_playwright()
    browser = await launch(playwright, find_chromium(None))
    try:
        page = await browser.new_page()
        await page.goto(base + "/warm-up")
        ways: list[tuple[str, object]] = [
            (f"goto, wait_until={w}", w) for w in ("load", "domcontentloaded", "commit")
        ]
        ways.append(("set_content (no request)", None))
        me = os.getpid()
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"Chromium {browser.version}, {navigations} navigations a way, load {load}")
        head = f"{'wall':>8} {'Chromium CPU':>13} {'driver':>7} {'ours':>6}"
        print(f"{'way (ms a navigation)':34} {head}")
        for label, wait in ways:
            b0, d0 = _descendants_cpu(me)
            o0, t0 = _own_cpu(), time.perf_counter()
            for i in range(navigations):
                if wait is None:
                    await page.set_content(BODY.decode())
                else:
                    await page.goto(f"{base}/p{i}", wait_until=wait)  # type: ignore[arg-type]
            wall = time.perf_counter() - t0
            b1, d1 = _descendants_cpu(me)
            own = _own_cpu() - o0
            n = navigations / 1000
            cells = f"{wall / n:8.1f} {(b1 - b0) / n:13.1f} {(d1 - d0) / n:7.1f} {own / n:6.1f}"
            print(f"{label:34} {cells}")
    finally:
        await browser.close()
        await playwright.stop()
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--navigations", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(measure(args.navigations))


if __name__ == "__main__":
    main()
