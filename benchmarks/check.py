#!/usr/bin/env python3
"""Link-checker benchmark: ``crawler check`` vs LinkChecker, linkinator, broken-link-checker.

    python benchmarks/check.py --install          # the peers into --peers (once; never committed)
    python benchmarks/check.py                    # 3,000 pages, all four, one after another
    python benchmarks/check.py --pages 300 --tools crawler   # a quick look

One run, the same site for every tool:

1. A generated site of N pages on 127.0.0.1 (each page ~10 links: a tree of pages, cross
   links, fragments, an image, a stylesheet) with known broken links of every kind (404, 410,
   500, a broken image and stylesheet, a redirect to a 404, a missing #fragment, a refused
   connection, a request that times out) and good links that naive checkers get wrong (429
   then 200 with Retry-After, HEAD answered 405, a slow page, a redirect to a good page, ``id``
   and ``<a name>`` fragments), plus an "external" server on 127.0.0.2 (good links, 404s, HEAD
   405, 429 once) whose pages link to pages that no site page links: a checker that requests
   one of those crawled what it must only check. The truth (`Site.truth`) is the set of broken
   URLs as linked.
2. The site is served by a separate process (``serve``), pinned to core 0 and started anew for
   each tool (the 429-once state starts fresh); the tool runs pinned to core 1. Wall time, CPU
   seconds (user + sys) and peak RSS come from ``os.wait4`` on the tool's process.
3. Each tool's report is parsed into the set of URLs it calls broken (errors, not warnings),
   mapped to the URL as linked (a redirect's end back to its start), and compared with the
   truth: found, missed, false positives. Requests the servers got are counted too.

Each tool gets the options that make it do this job best: recursion, external links checked,
fragments checked where it can, 429 retried where it can, a 5 s timeout where it has a
working one (crawler, LinkChecker; blc has none, linkinator's breaks good links here). The
server sends a ``LinkChecker`` header, the documented way for a site to lift LinkChecker's
default 0.1-0.6 s wait between requests. The exact commands are printed with the results;
see benchmarks/CHECK.md.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOOLS = ("crawler", "linkchecker", "linkinator", "blc")
PEER_VERSIONS = {"linkchecker": "10.6.0", "linkinator": "7.6.1", "broken-link-checker": "0.7.8"}
TIMEOUT = 5.0  # seconds, every tool that has a timeout
HANG = 15.0  # /hang/0 answers 504 after this long: past every timeout
SLOW = 2.0  # /slow/k answers 200 after this long: within every timeout


# ----------------------------------------------------------------- the site


@dataclass
class Site:
    """The pages and special targets of an N-page site; what a correct checker reports."""

    pages: int
    base: str = ""  # http://127.0.0.1:PORT
    ext: str = ""  # http://127.0.0.2:PORT
    dead: str = ""  # http://127.0.0.1:DEADPORT

    def specials(self) -> list[tuple[str, str, bool]]:
        """(href, tag, broken) of the targets every few pages link."""
        n = self.pages
        out: list[tuple[str, str, bool]] = []
        out += [(f"/missing/{k}.html", "a", True) for k in range(40)]
        out += [(f"/error/{k}", "a", True) for k in range(5)]
        out += [(f"/gone/{k}", "a", True) for k in range(5)]
        out += [(f"/img/missing-{k}.png", "img", True) for k in range(10)]
        out += [(f"/css/missing-{k}.css", "link", True) for k in range(2)]
        out += [(f"/redir-bad/{k}", "a", True) for k in range(5)]
        out += [(f"/p/{(k * 13 + 2) % n}.html#nope-{k}", "a", True) for k in range(20)]
        out += [(f"{self.ext}/ext/missing/{k}", "a", True) for k in range(10)]
        out += [(f"{self.dead}/x/{k}", "a", True) for k in range(3)]
        out += [("/hang/0", "a", True)]
        out += [(f"/limited/{k}", "a", False) for k in range(10)]
        out += [(f"/nohead/{k}", "a", False) for k in range(10)]
        out += [(f"/slow/{k}", "a", False) for k in range(5)]
        out += [(f"/redir-good/{k}", "a", False) for k in range(10)]
        out += [(f"{self.ext}/ext/ok/{k}", "a", False) for k in range(10)]
        out += [(f"{self.ext}/ext/nohead/{k}", "a", False) for k in range(5)]
        out += [(f"{self.ext}/ext/limited/{k}", "a", False) for k in range(5)]
        return out

    def linked_specials(self, i: int) -> list[tuple[str, str, bool]]:
        """The two special targets page ``i`` links."""
        specials = self.specials()
        return [specials[i % len(specials)], specials[(i * 7 + 1) % len(specials)]]

    def absolute(self, href: str) -> str:
        return href if "://" in href else self.base + href

    def _linked(self, broken: bool) -> set[str]:
        return {
            self.absolute(href)
            for i in range(self.pages)
            for href, _, b in self.linked_specials(i)
            if b == broken
        }

    def truth(self) -> set[str]:
        """The broken URLs some page links (all of them from 156 pages up)."""
        return self._linked(True)

    def tricky(self) -> set[str]:
        """The good-but-tricky URLs some page links."""
        return self._linked(False)

    def aliases(self) -> dict[str, str]:
        """Where a tool may report a broken redirect: its end, mapped to the URL as linked."""
        return {f"{self.base}/nowhere/{k}": f"{self.base}/redir-bad/{k}" for k in range(5)}

    def page(self, i: int) -> str:
        n = self.pages
        children = [c for c in range(10 * i + 1, 10 * i + 11) if c < n]
        lines = [
            "<!DOCTYPE html>",
            f'<html lang="en"><head><meta charset="utf-8"><title>Page {i}</title>',
            '<link rel="stylesheet" href="/style.css">',
            "</head><body>",
            f'<a name="top"></a><h1 id="h-{i}">Page {i}</h1>',
            f'<nav><a href="/">Home</a> <a href="/p/{max(0, (i - 1) // 10)}.html">Up</a></nav>',
            "<ul>",
            *(f'<li><a href="/p/{c}.html">Page {c}</a></li>' for c in children),
            "</ul>",
            f'<p>See <a href="/p/{(i * 7 + 3) % n}.html">a page</a>, '
            f'<a href="/p/{(i * 31 + 11) % n}.html#s1">a section</a> and '
            f'<a href="/p/{(i * 17 + 5) % n}.html#top">a named anchor</a>.</p>',
            f'<img src="/img/{i % 40}.png" alt="picture {i % 40}">',
            '<h2 id="s1">Section one</h2>',
            "<p>Text of the page, " + "words and more words " * 20 + "</p>",
        ]
        for href, tag, _ in self.linked_specials(i):
            if tag == "img":
                lines.append(f'<p><img src="{href}" alt="a picture"></p>')
            elif tag == "link":
                lines.append(f'<link rel="stylesheet" href="{href}">')
            else:
                lines.append(f'<p>Also: <a href="{href}">this</a>.</p>')
        lines.append("</body></html>")
        return "\n".join(lines) + "\n"


def serve(pages: int, dead_port: int, port_file: Path, hang: float = HANG) -> None:
    """Run both servers until SIGTERM; write their ports to ``port_file``."""
    from aiohttp import web  # noqa: PLC0415 (only the server process needs it)

    site = Site(pages)
    hits: Counter[str] = Counter()
    seen_once: set[str] = set()
    png = (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
        b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff"
        b"\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
    )

    def html(text: str, status: int = 200) -> web.Response:
        return web.Response(text=text, status=status, content_type="text/html")

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        hits[f"{request.method} {path}"] += 1
        head = request.method == "HEAD"
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow:\n")
        if path == "/":
            return html(site.page(0))
        if m := re.fullmatch(r"/p/(\d+)\.html", path):
            i = int(m.group(1))
            return html(site.page(i)) if i < pages else html("not found", 404)
        if re.fullmatch(r"/img/\d+\.png", path):
            return web.Response(body=png, content_type="image/png")
        if path == "/style.css":
            return web.Response(text="body{margin:2em}", content_type="text/css")
        if path.startswith("/error/"):
            return html("error", 500)
        if path.startswith("/gone/"):
            return html("gone", 410)
        if path.startswith("/redir-bad/"):
            raise web.HTTPFound("/nowhere/" + path.rsplit("/", 1)[1])
        if path.startswith("/redir-good/"):
            raise web.HTTPFound(f"/p/{path.rsplit('/', 1)[1]}.html")
        if path.startswith("/limited/"):
            if path not in seen_once:
                seen_once.add(path)
                return web.Response(status=429, headers={"Retry-After": "1"})
            return html("<p>fine now</p>")
        if path.startswith("/nohead/"):
            return web.Response(status=405) if head else html("<p>GET works</p>")
        if path.startswith("/slow/"):
            await asyncio.sleep(SLOW)
            return html("<p>slow but fine</p>")
        if path.startswith("/hang/"):
            await asyncio.sleep(hang)
            return html("too late", 504)
        return html("not found", 404)

    async def handle_ext(request: web.Request) -> web.StreamResponse:
        path = request.path
        hits[f"EXT {request.method} {path}"] += 1
        if path.startswith("/ext/ok/"):
            k = path.rsplit("/", 1)[1]
            return html(f'<p>External page. <a href="/ext/secret/{k}">Not linked by the site</a>')
        if path.startswith("/ext/nohead/"):
            return web.Response(status=405) if request.method == "HEAD" else html("<p>ok</p>")
        if path.startswith("/ext/limited/"):
            if path not in seen_once:
                seen_once.add(path)
                return web.Response(status=429, headers={"Retry-After": "1"})
            return html("<p>fine now</p>")
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow:\n")
        return html("not found", 404)

    async def _linkchecker_header(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["LinkChecker"] = "rate limit lifted"  # see _command("linkchecker")

    async def main() -> None:
        runners = []
        ports = []
        for host, handler in (("127.0.0.1", handle), ("127.0.0.2", handle_ext)):
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", handler)
            app.on_response_prepare.append(_linkchecker_header)
            runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
            await runner.setup()
            s = web.TCPSite(runner, host, 0, backlog=1024)
            await s.start()
            runners.append(runner)
            ports.append(s._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        site.base, site.ext = f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.2:{ports[1]}"
        site.dead = f"http://127.0.0.1:{dead_port}"
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        tmp = port_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(ports))
        tmp.replace(port_file)
        await stop.wait()
        port_file.with_suffix(".hits").write_text(json.dumps(hits))
        for r in runners:
            await r.cleanup()

    asyncio.run(main())


class Server:
    """The ``serve`` subprocess, pinned to core 0."""

    def __init__(self, pages: int, workdir: Path, hang: float = HANG) -> None:
        self.pages = pages
        self.workdir = workdir
        self.hang = hang

    def __enter__(self) -> Site:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        self.port_file = self.workdir / "ports.json"
        self.port_file.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "serve", str(self.pages), str(dead), str(self.port_file)]
        cmd.append(str(self.hang))
        self.proc = subprocess.Popen(_pinned(0) + cmd)
        deadline = time.monotonic() + 30
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the site server did not start")
            time.sleep(0.05)
        ports = json.loads(self.port_file.read_text())
        site = Site(self.pages, f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.2:{ports[1]}")
        site.dead = f"http://127.0.0.1:{dead}"
        return site

    def hits(self) -> Counter[str]:
        return Counter(json.loads(self.port_file.with_suffix(".hits").read_text()))

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def _pinned(core: int) -> list[str]:
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(core)] if taskset and (os.cpu_count() or 1) > 1 else []


# ----------------------------------------------------------------- the tools


def install(peers: Path) -> None:
    """LinkChecker into a venv, linkinator and broken-link-checker with npm, under ``peers``."""
    peers.mkdir(parents=True, exist_ok=True)
    venv = peers / "venv"
    if not (venv / "bin" / "linkchecker").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pin = f"linkchecker=={PEER_VERSIONS['linkchecker']}"
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", pin], check=True)
    npm = peers / "npm"
    if not (npm / "node_modules" / ".bin" / "blc").exists():
        npm.mkdir(exist_ok=True)
        (npm / "package.json").write_text('{"name": "check-bench-peers", "private": true}\n')
        pkgs = [f"{k}@{v}" for k, v in PEER_VERSIONS.items() if k != "linkchecker"]
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", *pkgs], cwd=npm, check=True
        )


@dataclass
class Run:
    tool: str
    command: list[str]
    exit_code: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    rss_mb: float = 0.0
    broken: set[str] = field(default_factory=set)
    warned: set[str] = field(default_factory=set)
    note: str = ""
    requests: int = 0
    ext_crawled: int = 0  # requests for external pages no site page links
    site: Site | None = None


def _command(tool: str, site: Site, peers: Path, out: Path) -> list[str] | None:
    seed = site.base + "/"
    if tool == "crawler":
        return [
            sys.executable, "-m", "crawler", "check", seed, "--format", "json",
            "--output", str(out), "--timeout", str(TIMEOUT), "--quiet",
        ]  # fmt: skip
    if tool == "linkchecker":
        exe = peers / "venv" / "bin" / "linkchecker"
        if not exe.exists():
            return None
        config = out.with_suffix(".linkcheckerrc")
        # AnchorCheck: the plugin that checks #fragments. maxrequestspersecond: LinkChecker
        # waits 0.1-0.6 s between requests to a host unless the server sends a "LinkChecker"
        # header, as ours does; then 1/N to 6/N s.
        config.write_text("[checking]\nmaxrequestspersecond=1000\n[AnchorCheck]\n")
        return [
            str(exe), "--config", str(config), "--check-extern", "--no-status",
            "--output", "csv", "--timeout", str(int(TIMEOUT)), seed,
        ]  # fmt: skip
    if tool == "linkinator":
        exe = peers / "npm" / "node_modules" / ".bin" / "linkinator"
        if not exe.exists():
            return None
        return [
            str(exe), seed, "--recurse", "--format", "json", "--check-fragments", "--retry",
        ]  # fmt: skip
        # No --timeout: with --timeout 5000 linkinator 7.6.1 reports thousands of good links
        # broken with status 0 on this site (pages the server answered 200); see CHECK.md.
    if tool == "blc":
        exe = peers / "npm" / "node_modules" / ".bin" / "blc"
        if not exe.exists():
            return None
        # --filter-level 3: stylesheets and images too; no timeout option exists.
        return [str(exe), seed, "--recursive", "--ordered", "--filter-level", "3"]
    raise ValueError(tool)


def _parse(tool: str, stdout: str, out: Path) -> tuple[set[str], set[str]]:
    """(URLs reported broken, URLs reported only as a warning) by one tool's output."""
    if tool == "crawler":
        report = json.loads(out.read_text())
        return {p["url"] for p in report["broken"]}, {p["url"] for p in report["warnings"]}
    if tool == "linkchecker":
        rows = [line for line in stdout.splitlines() if line and not line.startswith("#")]
        broken, warned = set(), set()
        for row in csv.DictReader(io.StringIO("\n".join(rows)), delimiter=";"):
            url = row["url"] or row["urlname"]
            if row.get("valid", "").lower() == "false":
                broken.add(url)
            elif "anchor" in row.get("warningstring", "").lower():
                # AnchorCheck warns on the page URL; the anchor is in the link as written.
                frag = row["urlname"].partition("#")[2]
                warned.add(f"{url.partition('#')[0]}#{frag}" if frag else url)
        return broken, warned
    if tool == "linkinator":
        data = json.loads(stdout[stdout.index("{") :])
        return {link["url"] for link in data["links"] if link["state"] == "BROKEN"}, set()
    if tool == "blc":
        return set(re.findall(r"BROKEN─\s+(\S+)", stdout)), set()
    raise ValueError(tool)


def _normal(url: str, site: Site) -> str:
    url = unquote(url.strip())
    if urlsplit(url).path == "" and "?" not in url and "#" not in url:
        url += "/"
    return site.aliases().get(url, url)


def run_tool(
    tool: str, pages: int, peers: Path, workdir: Path, time_limit: float, hang: float
) -> Run:
    server = Server(pages, workdir, hang)
    with server as site:
        out = workdir / f"{tool}.out"
        cmd = _command(tool, site, peers, out)
        if cmd is None:
            return Run(tool, [], site=site, note="not installed (--install)")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log = workdir / f"{tool}.stdout"
        err = workdir / f"{tool}.stderr"
        t0 = time.perf_counter()
        with open(log, "w") as so, open(err, "w") as se:
            proc = subprocess.Popen(_pinned(1) + cmd, stdout=so, stderr=se, env=env, cwd=workdir)
            deadline = t0 + time_limit
            status, usage = 0, None
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    proc.kill()
                    pid, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.02)
            proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        run = Run(tool, cmd, proc.returncode, wall, usage.ru_utime + usage.ru_stime, site=site)
        run.rss_mb = usage.ru_maxrss / 1024
        if wall > time_limit:
            run.note = f"killed at the {time_limit:.0f} s limit"
        try:
            broken, warned = _parse(tool, log.read_text(), out)
            run.broken = {_normal(u, site) for u in broken}
            run.warned = {_normal(u, site) for u in warned}
        except (OSError, ValueError, KeyError) as e:
            run.note += f" report not parsed: {e!r}"
    hits = server.hits()  # written by the server on SIGTERM
    run.requests = sum(hits.values())
    run.ext_crawled = sum(n for k, n in hits.items() if "/ext/secret/" in k)
    run.note = run.note.strip()
    return run


def score(run: Run) -> dict[str, object]:
    site = run.site
    assert site is not None
    truth = site.truth()
    found = run.broken & truth
    fp = run.broken - truth
    return {
        "tool": run.tool,
        "found": len(found),
        "of": len(truth),
        "missed": sorted(u.replace(site.base, "").replace(site.ext, "EXT") for u in truth - found),
        "false_positives": len(fp),
        "missed_but_warned": len((truth - found) & run.warned),
        "fp_urls": sorted(u.replace(site.base, "").replace(site.ext, "EXT") for u in fp),
        "tricky_reported": sorted(
            u.replace(site.base, "").replace(site.ext, "EXT") for u in fp & site.tricky()
        ),
        "wall_s": round(run.wall, 2),
        "cpu_s": round(run.cpu, 2),
        "peak_rss_mb": round(run.rss_mb, 1),
        "exit": run.exit_code,
        "requests": run.requests,
        "ext_pages_crawled": run.ext_crawled,
        "note": run.note,
        "command": " ".join(c.replace(site.base, "http://127.0.0.1:PORT") for c in run.command),
    }


def _missed_kinds(urls: list[str]) -> str:
    kinds = Counter(re.sub(r"[/#.-]?\d+.*$", "", re.sub(r"^EXT|^http://127\.0\.0\.1:\d+", "", u))
                    or u for u in urls)  # fmt: skip
    return ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated: " + ",".join(TOOLS))
    ap.add_argument("--peers", type=Path, default=Path(tempfile.gettempdir()) / "check-bench-peers")
    ap.add_argument("--install", action="store_true", help="install the peers into --peers")
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds per tool")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--keep", type=Path, help="keep each tool's output under this directory")
    ap.add_argument("--hang", type=float, default=HANG, help="seconds /hang/0 waits before its 504")
    args = ap.parse_args(argv)
    if args.install:
        install(args.peers)
    results = []
    with tempfile.TemporaryDirectory(prefix="check-bench-") as tmp_dir:
        tmp = args.keep or tmp_dir
        for tool in args.tools.split(","):
            print(f"running {tool} ...", file=sys.stderr, flush=True)
            workdir = Path(tmp) / tool
            workdir.mkdir(parents=True, exist_ok=True)
            os.chmod(workdir, 0o777)  # LinkChecker drops root for nobody
            run = run_tool(tool, args.pages, args.peers, workdir, args.time_limit, args.hang)
            results.append(score(run))
    site = Site(args.pages)
    print(f"\n{args.pages:,} pages; {len(Site(args.pages, 'B', 'E', 'D').truth())} broken URLs "
          f"known, {len(site.tricky())} good-but-tricky ones\n")  # fmt: skip
    head = "| tool | broken found | of the missed, warned | false positives | wall s | CPU s |"
    print(head + " peak RSS MB | requests | external pages crawled | exit |")
    print("|---" * 10 + "|")
    for r in results:
        print(
            f"| {r['tool']} | {r['found']}/{r['of']} | {r['missed_but_warned']} | "
            f"{r['false_positives']} | {r['wall_s']} | "
            f"{r['cpu_s']} | {r['peak_rss_mb']} | {r['requests']:,} | {r['ext_pages_crawled']} | "
            f"{r['exit']} |"
        )
    for r in results:
        print(f"\n{r['tool']}: {r['command']}")
        if r["note"]:
            print(f"  note: {r['note']}")
        if r["missed"]:
            print(f"  missed: {_missed_kinds(r['missed'])}")  # type: ignore[arg-type]
        if r["fp_urls"]:
            print(f"  false positives: {', '.join(r['fp_urls'][:12])}")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(main())
