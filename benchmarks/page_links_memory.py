"""Peak RSS of ``crawler crawl`` on pages of 500,000 links each (issue 27, item 4).

    python benchmarks/page_links_memory.py                  # this tree, all cases
    python benchmarks/page_links_memory.py --tree ../other  # another checkout (before/after)
    python benchmarks/page_links_memory.py --cases memory,state --links 200000

A local server (127.0.0.1, in a process of its own: a child's ``ru_maxrss`` starts from its
parent's RSS at the fork, so the parent must stay small; the URL lists are counted and digested
by ``sort`` and ``sha256sum`` for the same reason) serves an unbounded site whose every
page holds ``--links`` distinct in-scope links (``<a href=/N>``, ~20 bytes each: 500,000 fit in
the default 10 MiB body cap) to pages no other page links to, so that every link is a new URL.
Each case runs ``python -m crawler crawl`` of that site in a subprocess with the tree's
``PYTHONPATH``, its URLs written to a file, and reads the child's peak RSS from
``os.wait4``'s ``ru_maxrss``. Cases:

* ``memory``: ``--max-pages 10 --max-links-per-page 0`` (no cap: the crawl's limits alone);
* ``state``: the same with ``--state DIR`` (SQLite, a fresh directory);
* ``capped``: ``--max-pages 10`` and the default ``--max-links-per-page``;
* ``small``: ``--max-pages 10 --max-links-per-page 1000``.

A tree without ``--max-links-per-page`` (before it existed) runs ``memory`` and ``state``
without the flag. Prints one line a case: peak RSS, wall time, URLs listed, and a digest of
the sorted list of the URLs' paths (the same digest on two trees: the same URLs listed).
Results and the command are in benchmarks/MEMORY.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def page(n: int, links: int) -> bytes:
    """Page ``n``: links to pages ``n * links + 1 .. n * links + links`` (never linked twice)."""
    first = n * links + 1
    body = "<a href=/" + "><a href=/".join(map(str, range(first, first + links))) + ">"
    return f"<!doctype html><title>{n}</title>{body}".encode()


def serve(links: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            path = self.path.lstrip("/")
            if path == "robots.txt" or not (path == "" or path.isdigit()):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = page(int(path or 0), links)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.handle_error = lambda *args: None  # type: ignore[method-assign]  # (a crawl's end)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def has_cap(tree: Path) -> bool:
    out = subprocess.run(
        [sys.executable, "-m", "crawler", "crawl", "--help"],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        cwd=tree,
    ).stdout
    return "--max-links-per-page" in out


def run(tree: Path, seed: str, args: list[str], tmp: Path) -> tuple[int, float, int, str]:
    """(peak RSS in KiB, wall seconds, URLs listed, digest of the sorted URLs) of one crawl."""
    out = tmp / "urls.txt"
    cmd = [sys.executable, "-m", "crawler", "crawl", seed, "--quiet", "-o", str(out), *args]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} exited {proc.returncode}")
    # Counted and digested by sort and sha256sum: the list read here would grow this process,
    # and the next child's ru_maxrss starts from it (see the module docstring).
    sort = subprocess.run(
        f"sed 's|^http://127.0.0.1:[0-9]*||' {out} | LC_ALL=C sort | tee >(wc -l >{tmp}/n)"
        " | sha256sum", shell=True,
        executable="/bin/bash", capture_output=True, text=True, check=True,
    )  # fmt: skip
    time.sleep(0.1)  # (the process substitution's wc)
    n = int((tmp / "n").read_text())
    return usage.ru_maxrss, wall, n, sort.stdout[:12]


def server_process(links: int) -> tuple[subprocess.Popen[str], str]:
    """The site in a child process (``--serve``), and its seed URL."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--links", str(links)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run (PYTHONPATH)")
    ap.add_argument("--links", type=int, default=500_000, help="links a page")
    ap.add_argument("--pages", type=int, default=10, help="--max-pages")
    ap.add_argument("--cases", default="memory,state,capped,small")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.serve:  # the child: serve until killed
        server = serve(opts.links)
        print(f"http://127.0.0.1:{server.server_address[1]}/", flush=True)
        threading.Event().wait()
    tree = opts.tree.resolve()
    proc, seed = server_process(opts.links)
    cap = has_cap(tree)
    cases = {
        "memory": ["--max-links-per-page", "0"] if cap else [],
        "state": ["--max-links-per-page", "0"] if cap else [],
        "capped": [] if cap else None,
        "small": ["--max-links-per-page", "1000"] if cap else None,
    }
    print(f"tree {tree}, {opts.links:,} links a page, --max-pages {opts.pages}")
    for name in opts.cases.split(","):
        extra = cases[name]
        if extra is None:
            print(f"{name:7} (no --max-links-per-page in this tree)")
            continue
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            args = ["--max-pages", str(opts.pages), *extra]
            if name == "state":
                args += ["--state", str(tmp / "state")]
            rss, wall, n, digest = run(tree, seed, args, tmp)
        print(
            f"{name:7} peak RSS {rss / 1024:7.1f} MB  {wall:6.1f} s  {n:>9,} URLs  "
            f"sha256 {digest}  ({' '.join(args[2:]) or 'defaults'})",
            flush=True,
        )
    proc.kill()
    proc.wait()


if __name__ == "__main__":
    main()
