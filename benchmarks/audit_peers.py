#!/usr/bin/env python3
"""``crawler audit`` beside a peer on the same sites: the same findings where they overlap,
and the time and memory each takes (issue 26: "Compare with an open-source audit crawler
that installs here ... otherwise Scrapy with a link-graph pipeline").

    python benchmarks/audit_peers.py                       # both sites below
    python benchmarks/audit_peers.py --site planted        # findings only
    python benchmarks/audit_peers.py --site standard --pages 20000
    python benchmarks/audit_peers.py --site postgres       # a real documentation site

The peer is ``benchmarks/audit_scrapy.py`` (Scrapy, a graph spider and the audit's rules
written over its graph, independently of ``crawler.audit``; why not SEOnaut or LibreCrawl:
see its docstring). Two sites:

* ``planted``: the test site that holds every kind of finding once, and its near misses
  (tests/audit_site.py, served by aiohttp in a child process). Each tool's findings, as
  (kind, path), against the planted ones: both must list exactly those.
* ``standard``: the crawl benchmark's generated site (benchmarks/crawl/sitegen.py: 30-60 KB
  pages, ~100 same-host links each; 20,000 pages is ~2 million links) served by the pinned
  nginx of benchmarks/crawl.py, each tool run by its ``run_one`` (pinned to one core, peak
  RSS from VmHWM, pages counted in nginx's log): wall, CPU and peak RSS as ratios, and the
  findings compared kind by kind (counts, and the URLs each lists that the other does not),
  and the graph each saw (HTML pages, edges, click depth distribution).
* ``postgres``: the PostgreSQL 15 manual (Debian's postgresql-doc-15, 1,169 pages; installed
  with apt-get when missing), served and measured the same way: a real site's findings.

Scrapy is installed into this Python with pip when missing (as benchmarks/crawl.py does).
Figures: benchmarks/AUDIT_PEERS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import crawl as crawlbench  # noqa: E402

_SERVE_PLANTED = """
import sys
sys.path.insert(0, {tests!r})
from aiohttp import web
import audit_site
web.run_app(audit_site.site_app(), host="127.0.0.1", port={port}, print=None)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ours(url: str, out: Path, conc: int) -> list[str]:
    return [sys.executable, "-m", "crawler", "audit", url, "--concurrency", str(conc),
            "--per-host", str(conc), "--max-depth", "1000", "--quiet", "-f", "json",
            "-o", str(out)]  # fmt: skip


def _scrapy(url: str, out: Path, conc: int, limit: float) -> list[str]:
    return [sys.executable, str(HERE / "audit_scrapy.py"), url, "--concurrency", str(conc),
            "--time-limit", str(limit), "--out", str(out)]  # fmt: skip


def _our_findings(path: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in json.loads(path.read_text())["findings"]:
        found.setdefault(f["kind"], set()).add(f["url"])
    return found


def _peer_findings(path: Path) -> dict[str, set[str]]:
    return {k: set(v) for k, v in json.loads(path.read_text())["findings"].items()}


def _paths(found: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(kind, urlsplit(u).path) for kind, urls in found.items() for u in urls}


def planted(conc: int) -> bool:
    sys.path.insert(0, str(ROOT / "tests"))
    import audit_site  # noqa: PLC0415

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVE_PLANTED.format(tests=str(ROOT / "tests"), port=port)]
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        with tempfile.TemporaryDirectory(prefix="auditpeers-") as tmp:
            ours, peer = Path(tmp, "ours.json"), Path(tmp, "peer.json")
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            subprocess.run(_ours(url, ours, conc), env=env, check=False)
            subprocess.run(_scrapy(url, peer, conc, 60), env=env, check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            got = {"crawler audit": _paths(_our_findings(ours)),
                   "Scrapy + graph pipeline": _paths(_peer_findings(peer))}  # fmt: skip
    finally:
        server.terminate()
        server.wait()
    expected = set(audit_site.EXPECTED)
    kinds = sorted({k for k, _ in expected})
    print(f"\nplanted site: {len(expected)} findings of {len(kinds)} kinds")
    print(f"{'kind':32} {'planted':>7} {'ours':>5} {'Scrapy':>6}")
    for kind in kinds:
        counts = [sum(1 for k, _ in s if k == kind) for s in (expected, *got.values())]
        print(f"{kind:32} {counts[0]:>7} {counts[1]:>5} {counts[2]:>6}")
    ok = True
    for name, found in got.items():
        missing, extra = sorted(expected - found), sorted(found - expected)
        verdict = "exactly the planted findings" if not missing and not extra else "DIFFERS"
        print(f"{name}: {verdict}" + (f"; missing {missing}" if missing else "")
              + (f"; extra {extra}" if extra else ""))  # fmt: skip
        ok = ok and not missing and not extra
    return ok


def served(site: str, pages: int, seed: int, site_dir: Path, conc: int, limit: float) -> bool:
    """Both tools on a site nginx serves: the generated one or the PostgreSQL manual."""
    if site == "postgres":
        import cluster_site  # noqa: PLC0415  (installs postgresql-doc-15 when missing)

        root, start = cluster_site.ensure_manual(), "/index.html"
    else:
        root, total, _ = crawlbench.build("standard", pages, seed, site_dir)
        crawlbench.log(f"site {root}: {pages} pages, {total / 1e6:.0f} MB")
        start = "/"
    crawlbench._ensure_scrapy()
    nginx = crawlbench.Nginx(crawlbench._apt_install("nginx", "nginx"), root, core=0)
    url = nginx.base + start
    runs: dict[str, crawlbench.Run] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="auditpeers-") as tmp:
            ours, peer = Path(tmp, "ours.json"), Path(tmp, "peer.json")
            for run in (
                crawlbench.Run("crawler audit", _ours(url, ours, conc)),
                crawlbench.Run("Scrapy + graph pipeline", _scrapy(url, peer, conc, limit)),
            ):
                done = crawlbench.run_one(run, nginx, 1, limit, Path(tmp))
                crawlbench.log(
                    f"{run.name}: {done.pages} pages, {done.wall:.1f} s wall, {done.cpu:.1f} "
                    f"CPU s, {done.rss_mb:.0f} MB peak RSS, exit {done.exit}"
                )
                runs[run.name] = done
            found = {"crawler audit": _our_findings(ours), "Scrapy": _peer_findings(peer)}
            ours_stats = json.loads(ours.read_text())["stats"]
            peer_stats = json.loads(peer.read_text())
    finally:
        nginx.stop()
    base = runs["crawler audit"]
    print(f"\n{site} site ({root}), concurrency {conc}, load {base.load[0]:.1f}")
    print(f"{'tool':26} {'pages':>6} {'wall s':>7} {'CPU s':>6} {'RSS MB':>7} {'x wall':>7}"
          f" {'x CPU':>6} {'x RSS':>6}")  # fmt: skip
    for name, r in runs.items():
        print(
            f"{name:26} {r.pages:>6} {r.wall:>7.1f} {r.cpu:>6.1f} {r.rss_mb:>7.0f}"
            f" {r.wall / base.wall:>7.2f} {r.cpu / base.cpu:>6.2f} {r.rss_mb / base.rss_mb:>6.2f}"
        )
    for name, st in (("crawler audit", ours_stats), ("Scrapy", peer_stats)):
        depth = dict(sorted(st["depth"].items(), key=lambda kv: (not kv[0].isdigit(), kv[0])))
        print(f"{name}: {st['pages']} HTML pages, {st['edges']} edges, click depth {depth}")
    ours_f, peer_f = found["crawler audit"], found["Scrapy"]
    print(f"{'kind':32} {'ours':>6} {'Scrapy':>6} {'only ours':>9} {'only Scrapy':>11}")
    same = True
    for kind in sorted(set(ours_f) | set(peer_f)):
        a, b = ours_f.get(kind, set()), peer_f.get(kind, set())
        print(f"{kind:32} {len(a):>6} {len(b):>6} {len(a - b):>9} {len(b - a):>11}")
        for url in sorted(a ^ b)[:3]:
            print(f"    {'ours only' if url in a else 'Scrapy only'}: {url}")
        same = same and a == b
    print("findings: " + ("the same" if same else "DIFFER (above)")
          + (f" ({sum(map(len, ours_f.values()))} each)" if same else ""))  # fmt: skip
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--site", choices=["planted", "standard", "postgres", "all"], default="all")
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--site-dir", default="/tmp/crawlbench")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=900.0)
    args = ap.parse_args(argv)
    ok = True
    if args.site in ("planted", "all"):
        ok = planted(args.concurrency) and ok
    for site in ("postgres", "standard"):
        if args.site in (site, "all"):
            ok = served(site, args.pages, args.seed, Path(args.site_dir), args.concurrency,
                        args.time_limit) and ok  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
