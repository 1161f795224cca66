"""The renderer itself: pages/s, CPU a page and the browser tree's memory (issue 24).

    python benchmarks/render.py                        # ours at concurrency 1, 2, 4, memory runs
    python benchmarks/render.py --crawlee VENV/bin/python   # + crawlee's PlaywrightCrawler
    python benchmarks/render.py --quick                # fewer pages

A local server (its own process, 127.0.0.1) serves a simple client-rendered page: an empty
``<div id="root">`` and a script that fetch()es a JSON list of 20 links and writes them into
the DOM. Each contender renders the same list of page URLs (no link following: the cost of a
render is measured, not a crawl's) at the same concurrency, in a child process:

* ``ours``: GET the page (aiohttp), then ``Renderer.render`` (crawler/render) and the crawl's
  extractor on the rendered HTML; an allow-all gate.
* ``crawlee``: crawlee's ``PlaywrightCrawler`` (PyPI ``crawlee[playwright]``, in its own
  venv) on Debian's Chromium through its launch options (same flags), headless; the handler
  waits until the 20 links are in the DOM and reads their hrefs.

Every run must find all 20 links on every page. CPU is the child's and all its reaped
descendants' (the driver, every Chromium process), from ``wait4``; memory is the process
tree's, sampled every 0.2 s from /proc: the sum of PSS (shared pages split between the
processes that share them) and of RSS (shared pages counted in each). The machine's load
average is printed with the results: other work on the machine slows every contender.
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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINKS_PER_PAGE = 20
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

PAGE = (
    '<!doctype html><html><head><title>p{i}</title><script src="/app.js"></script></head>'
    '<body><div id="root"></div></body></html>'
)
APP_JS = """
addEventListener("DOMContentLoaded", async () => {
  const id = location.pathname.split("/").pop();
  const data = await (await fetch("/api/" + id + ".json")).json();
  const root = document.getElementById("root");
  for (const href of data.links) {
    const a = document.createElement("a"); a.href = href; a.textContent = href; root.append(a);
  }
});
"""


# -- the server (its own process) --


def serve(port_file: str) -> None:
    from aiohttp import web  # noqa: PLC0415

    async def page(request: web.Request) -> web.Response:
        i = request.match_info["i"]
        return web.Response(text=PAGE.format(i=i), content_type="text/html")

    async def app_js(_: web.Request) -> web.Response:
        return web.Response(text=APP_JS, content_type="application/javascript")

    async def api(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        links = [f"/p/{(i * 7 + k) % 100000}" for k in range(LINKS_PER_PAGE)]
        return web.json_response({"links": links})

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/p/{i}", page)
        app.router.add_get("/app.js", app_js)
        app.router.add_get("/api/{i}.json", api)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        Path(port_file).write_text(str(port))
        await asyncio.Event().wait()

    asyncio.run(main())


# -- ours (child process) --


def run_ours(base: str, pages: int, concurrency: int, recycle: int) -> None:
    import aiohttp  # noqa: PLC0415

    from crawler.extract import extract_links  # noqa: PLC0415
    from crawler.render import Renderer, RenderOptions  # noqa: PLC0415

    class AllowAll:
        async def allow(self, url: str, resource_type: str, page_url: str) -> bool:
            return True

        def release(self, url: str) -> None:
            pass

        def headers_for(self, url: str) -> dict[str, str]:
            return {}

    async def main() -> dict[str, object]:
        options = RenderOptions(concurrency=concurrency, timeout=10, recycle_after=recycle)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(pages):
            queue.put_nowait(i)
        found: list[int] = []
        errors: list[str] = []
        async with aiohttp.ClientSession() as http, Renderer(options, AllowAll()) as renderer:
            await renderer.start()
            started = time.monotonic()

            async def worker() -> None:
                while not queue.empty():
                    i = queue.get_nowait()
                    url = f"{base}/p/{i}"
                    async with http.get(url) as response:
                        body = await response.read()
                        headers = response.headers
                    result = await renderer.render(url, body, headers)
                    if result.error or result.html is None:
                        errors.append(f"{url}: {result.error} {result.detail}")
                        continue
                    links = extract_links(result.html, result.final_url, "utf-8")
                    found.append(sum(1 for link in links if "/p/" in (link.url or "")))

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            wall = time.monotonic() - started
            restarts = renderer.restarts
        return {"wall": wall, "found": found, "errors": errors[:5], "restarts": restarts}

    print(json.dumps(asyncio.run(main())), flush=True)


# -- crawlee (child process, crawlee's venv) --

CRAWLEE = r"""
import asyncio, json, sys, time
from crawlee import ConcurrencySettings
from crawlee.crawlers import PlaywrightCrawler, PlaywrightCrawlingContext

base, pages, concurrency, flags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]

async def main():
    found, errors = [], []
    crawler = PlaywrightCrawler(
        headless=True,
        browser_type="chromium",
        browser_launch_options={"executable_path": "/usr/bin/chromium", "args": flags},
        concurrency_settings=ConcurrencySettings(
            min_concurrency=concurrency, max_concurrency=concurrency,
            desired_concurrency=concurrency),
        max_request_retries=0,
        configure_logging=False,
    )

    @crawler.router.default_handler
    async def handler(context: PlaywrightCrawlingContext) -> None:
        await context.page.wait_for_selector("#root a:nth-child(%d)" % LINKS)
        hrefs = await context.page.eval_on_selector_all("a", "els => els.map(e => e.href)")
        found.append(sum(1 for h in hrefs if "/p/" in h))

    urls = [f"{base}/p/{i}" for i in range(pages)]
    started = time.monotonic()
    await crawler.run(urls)
    wall = time.monotonic() - started
    print(json.dumps({"wall": wall, "found": found, "errors": errors, "restarts": 0}), flush=True)

asyncio.run(main())
""".replace("LINKS", str(LINKS_PER_PAGE))


# -- measuring a child's process tree --


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack += children.get(pid, [])
    return out


def tree_memory(pids: list[int]) -> tuple[int, int]:
    """(PSS, RSS) sums in KiB."""
    pss = rss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except OSError:
            continue
    return pss, rss


def run_measured(argv: list[str]) -> tuple[float, float, int, int, str]:
    """Run ``argv`` in a scratch directory (crawlee writes its storage/ into the working
    directory) and measure its process tree: (wall s, CPU s of the child and its reaped
    descendants, peak PSS KiB, peak RSS KiB, its stdout). Exits if the child fails."""
    scratch = tempfile.mkdtemp(prefix="render-bench-")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=scratch, env=env)
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            pss, rss = tree_memory(process_tree(child.pid))
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert child.stdout is not None
    out = child.stdout.read().decode()  # (read before the wait: a full pipe would block it)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    shutil.rmtree(scratch, ignore_errors=True)
    if status != 0:
        raise SystemExit(f"{argv[:4]} failed (status {status})")
    return wall, usage.ru_utime + usage.ru_stime, peak[0], peak[1], out


def measure(argv: list[str], pages: int) -> dict[str, object]:
    """Run ``argv`` (a child that prints one JSON line) and measure its process tree."""
    total, cpu, pss, rss, stdout = run_measured(argv)
    out = stdout.strip().splitlines()
    if not out:
        raise SystemExit(f"{argv[:3]} printed nothing")
    peak = [pss, rss]
    result = json.loads(out[-1])
    found = result["found"]
    complete = len(found) == pages and all(n == LINKS_PER_PAGE for n in found)
    return {
        "pages/s": pages / result["wall"],
        "wall": result["wall"],
        "process_wall": total,
        "cpu": cpu,
        "cpu_ms_page": cpu / pages * 1000,
        "peak_pss_mb": peak[0] / 1024,
        "peak_rss_mb": peak[1] / 1024,
        "complete": complete,
        "errors": result["errors"],
        "restarts": result["restarts"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 pages a run, 200 for memory")
    parser.add_argument("--pages", type=int, default=200, help="pages a throughput run")
    parser.add_argument("--memory-pages", type=int, default=500, help="pages a memory run")
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--crawlee", metavar="PYTHON", help="a python with crawlee[playwright]")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    parser.add_argument("--ours", nargs=4, metavar="X", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.ours:
        run_ours(args.ours[0], int(args.ours[1]), int(args.ours[2]), int(args.ours[3]))
        return
    pages = 60 if args.quick else args.pages
    memory_pages = 200 if args.quick else args.memory_pages
    port_file = Path(f"/tmp/render-bench-port-{os.getpid()}")
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file)])
    try:
        while not port_file.exists():
            time.sleep(0.05)
        time.sleep(0.1)
        base = f"http://127.0.0.1:{port_file.read_text()}"
        env_python = sys.executable
        results: list[dict[str, object]] = []
        load_before = os.getloadavg()
        for c in [int(x) for x in args.concurrency.split(",")]:
            runs = [("ours", [env_python, __file__, "--ours", base, str(pages), str(c), "200"])]
            if args.crawlee:
                argv = [args.crawlee, "-c", CRAWLEE, base, str(pages), str(c), *FLAGS]
                runs.append(("crawlee PlaywrightCrawler", argv))
            for name, argv in runs:
                r = measure(argv, pages)
                r.update(name=name, concurrency=c, pages=pages)
                results.append(r)
                _print(r)
        for recycle in (200, 10**9):
            argv = [env_python, __file__, "--ours", base, str(memory_pages), "2", str(recycle)]
            r = measure(argv, memory_pages)
            label = f"ours, recycle_after={recycle}" if recycle < 10**9 else "ours, no recycling"
            r.update(name=label, concurrency=2, pages=memory_pages)
            results.append(r)
            _print(r)
        load_after = os.getloadavg()
        print(f"load average before {load_before}, after {load_after}; {os.cpu_count()} CPUs")
        if args.json:
            Path(args.json).write_text(
                json.dumps({"results": results, "load": [load_before, load_after]}, indent=1)
            )
    finally:
        server.terminate()
        server.wait()
        port_file.unlink(missing_ok=True)


def _print(r: dict[str, object]) -> None:
    print(
        f"{r['name']:<28} c={r['concurrency']} pages={r['pages']:<4} "
        f"{r['pages/s']:6.2f} pages/s  {r['cpu_ms_page']:6.1f} ms CPU/page  "
        f"peak PSS {r['peak_pss_mb']:6.0f} MB  RSS {r['peak_rss_mb']:6.0f} MB  "
        f"restarts {r['restarts']}  complete {r['complete']} {r['errors'] or ''}",
        flush=True,
    )


if __name__ == "__main__":
    main()
