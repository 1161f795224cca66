#!/usr/bin/env python3
"""``--render auto`` on real documentation sites: what it renders, and what it costs.

    python benchmarks/render_auto.py              # the four sites, 5 pairs of runs each
    python benchmarks/render_auto.py --runs 9 --sites postgresql,nodejs

The documentation installed on this machine is served from its directory by a threaded
``http.server`` in its own process (127.0.0.1, a free port), each site whole:

* ``postgresql``: /usr/share/doc/postgresql-doc-15/html (DocBook, 1,169 pages);
* ``nodejs``: /usr/share/doc/nodejs/api (Node.js's API docs, 65 pages, script-enhanced);
* ``npm``: /usr/lib/node_modules/npm/docs/output (npm's docs, 93 pages);
* ``rust-std``: Rust's std docs from rustup's stable toolchain (rustdoc: every page carries
  scripts; a ``--max-pages`` budget of 2,000 of its 2,475 pages).

For each site, once: ``crawler crawl SEED --render auto -f jsonl`` and the pages it rendered
(``"rendered": true``; none should be: their links are in the HTML). Then ``--render never``
and ``--render auto`` in turn, ``--runs`` times each (never, auto, never, auto ...: pairing
keeps the ratio meaningful on a machine whose load drifts), each a fresh process; CPU seconds
(user+sys) and peak RSS from ``os.wait4`` on the crawler, wall clock around it. Prints the
medians and the auto/never ratios a site, and the load average before and after.

The crawler starts no browser and imports no Playwright on these sites (no page needs one),
so what ``auto`` adds is the page job keeping each HTML body's chunk list and one comparison a
page (no page has fewer than 20 links), or the 64 KB scans for a thin page.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUST = Path("/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html")
SITES = {
    "postgresql": (Path("/usr/share/doc/postgresql-doc-15/html"), "index.html", 0),
    "nodejs": (Path("/usr/share/doc/nodejs/api"), "index.html", 0),
    "npm": (Path("/usr/lib/node_modules/npm/docs/output"), "commands/npm.html", 0),
    "rust-std": (RUST, "std/index.html", 2000),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"http.server on {directory} did not start")


def run(argv: list[str]) -> tuple[float, float, int, int]:
    """(wall s, cpu s, peak RSS KiB, exit code) of the crawler as a child process."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "crawler", *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def measure(name: str, runs: int) -> dict[str, object]:
    directory, seed_path, max_pages = SITES[name]
    server, port = serve(directory)
    try:
        seed = f"http://127.0.0.1:{port}/{seed_path}"
        base = [seed, "-q", "--per-host", "8", "--max-pages", str(max_pages)]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "auto.jsonl"
            run(["crawl", *base, "--render", "auto", "-f", "jsonl", "-o", str(out)])
            records = [json.loads(line) for line in out.read_text().splitlines()]
        html = [r for r in records if (r.get("content_type") or "").startswith("text/html")]
        rendered = [r["url"] for r in records if r.get("rendered")]
        figures: dict[str, list[tuple[float, float, int, int]]] = {"never": [], "auto": []}
        for _ in range(runs):
            for mode in ("never", "auto"):
                figures[mode].append(run(["crawl", *base, "--render", mode, "-o", os.devnull]))
    finally:
        server.terminate()
        server.wait()
    med = {
        mode: {
            "wall": statistics.median(f[0] for f in runs_),
            "cpu": statistics.median(f[1] for f in runs_),
            "rss_mib": statistics.median(f[2] for f in runs_) / 1024,
            "codes": sorted({f[3] for f in runs_}),
        }
        for mode, runs_ in figures.items()
    }
    ratios = [a[1] / n[1] for n, a in zip(figures["never"], figures["auto"], strict=True)]
    return {
        "site": name,
        "pages": len(records),
        "html_pages": len(html),
        "rendered": len(rendered),
        "rendered_urls": rendered[:10],
        "never": med["never"],
        "auto": med["auto"],
        "cpu_ratio_median": statistics.median(ratios),
        "cpu_ratio_min": min(ratios),
        "cpu_ratio_max": max(ratios),
    }


def test_site() -> str:
    """How often auto is right on the local client-rendered site (tests/render_site.py), with
    ``always`` as the yardstick: the pages auto rendered, how many of them had links only the
    rendered DOM had, and the pages auto did not render where ``always`` found such links."""
    import asyncio  # noqa: PLC0415

    sys.path.insert(0, str(ROOT))
    from crawler import crawl  # noqa: PLC0415
    from tests.render_site import RenderSite, start  # noqa: PLC0415

    async def both() -> dict[str, dict[str, tuple[bool, int]]]:
        site = RenderSite(pages=30, memory_mb=512)
        url, _other, runners = await start(site)
        out: dict[str, dict[str, tuple[bool, int]]] = {}
        try:
            for mode in ("auto", "always"):
                seeds = [url + "/", url + "/spa/0", url + "/ssr/0", url + "/mix/0"]
                result = await crawl(seeds, render=mode, render_timeout=3.0, max_pages=1000)
                out[mode] = {
                    p.url[len(url) :]: (bool(p.rendered), len(p.rendered_links))
                    for p in result.pages
                    if p.content_type == "text/html"
                    and not p.url.startswith(url + "/hostile/forever/")
                }
        finally:
            for runner in runners:
                await runner.cleanup()
        return out

    got = asyncio.run(both())
    auto, always = got["auto"], got["always"]
    rendered = [p for p, (r, _) in auto.items() if r]
    useful = [p for p in rendered if auto[p][1]]
    missed = [p for p, (r, _) in auto.items() if not r and always.get(p, (False, 0))[1]]
    idle = sorted(set(rendered) - set(useful))
    return (
        f"test site: {len(auto)} HTML pages; auto rendered {len(rendered)}, {len(useful)} of"
        f" them with links only their scripts made (the rest: {idle});"
        f" always rendered {sum(r for r, _ in always.values())}; pages auto skipped where"
        f" always found such links: {len(missed)} {missed}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sites", default=",".join(SITES))
    ap.add_argument("--test-site", action="store_true", help="only the test site's precision")
    args = ap.parse_args()
    if args.test_site:
        print(test_site())
        return 0
    print(f"load average before: {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    for name in args.sites.split(","):
        if not SITES[name][0].is_dir():
            print(f"{name}: {SITES[name][0]} not installed, skipped")
            continue
        r = measure(name, args.runs)
        n, a = r["never"], r["auto"]
        print(
            f"{name}: {r['pages']} pages ({r['html_pages']} HTML), rendered by auto:"
            f" {r['rendered']} {r['rendered_urls'] or ''}\n"
            f"  never: wall {n['wall']:.2f} s, cpu {n['cpu']:.2f} s, peak {n['rss_mib']:.0f} MiB,"  # type: ignore[index]
            f" exit {n['codes']}\n"  # type: ignore[index]
            f"  auto:  wall {a['wall']:.2f} s, cpu {a['cpu']:.2f} s, peak {a['rss_mib']:.0f} MiB,"  # type: ignore[index]
            f" exit {a['codes']}\n"  # type: ignore[index]
            f"  auto/never cpu, pair by pair: median {r['cpu_ratio_median']:.3f}"
            f" (min {r['cpu_ratio_min']:.3f}, max {r['cpu_ratio_max']:.3f})",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
