"""Start-up time of the ``crawler`` command beside wget's, median of N runs, wall and CPU.

    python benchmarks/startup.py [--runs 21] [--json FILE] [--no-pyc] [--compare DIR]

Timed, each in a fresh process, one after the other (the runs interleave the commands so that
a burst of load on the shared machine hits all of them alike):

* ``crawler --version``, ``crawler --help``;
* ``crawler crawl URL -q -o /dev/null``: a crawl of one local page (robots.txt asked first,
  a 404), and the same with ``--ignore-robots``;
* ``wget --version`` and ``wget -q -O /dev/null URL`` of the same page;
* floors: ``python -c pass`` (the interpreter and its site-packages ``.pth`` files), ``python
  -c "import asyncio"`` and ``python -c "import aiohttp"`` (what any asyncio/aiohttp program
  pays before its first line).

The page (15 KB of HTML, 20 links to itself) is served by an aiohttp server in a process of
its own on 127.0.0.1 (its CPU is not counted). ``crawler`` is the console script beside this
interpreter, not a pyenv shim (a shim is a bash script that costs ~0.1 s of its own here).
Wall time: ``time.perf_counter`` around the child; CPU: the child's user + system time
(``os.wait4``). The medians are printed with the ratios to wget's.

``--compare DIR``: also ``python -m crawler`` run from the project tree DIR (PYTHONPATH=DIR;
e.g. a copy with some files as they were before a change) and from this tree the same way,
interleaved with the rest: an A/B on the same machine state, which a loaded machine needs.

Byte code: where ``PYTHONDONTWRITEBYTECODE`` is set (it is on the benchmark machine), every
import compiles its module from source, which an installed package never does; so the runs
drop it and put the byte code in a temporary ``PYTHONPYCACHEPREFIX`` (one warm-up run of each
command fills it). ``--no-pyc`` keeps the environment as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from crawl import _apt_install  # noqa: E402 (the crawl benchmark's installer, one copy)

SERVER = r"""
import sys
from aiohttp import web
body = sys.argv[2].encode()
async def page(request):
    if request.path != "/one-page":
        raise web.HTTPNotFound()
    return web.Response(body=body, content_type="text/html")
app = web.Application()
app.router.add_get("/{tail:.*}", page)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def crawler_command() -> list[str]:
    """The ``crawler`` console script of this interpreter (else ``python -m crawler``)."""
    beside = Path(sys.executable).with_name("crawler")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "crawler"]


def page_body() -> str:
    paras = "".join(
        f"<p>Paragraph {i}: {'lorem ipsum dolor sit amet ' * 25}"
        f'<a href="/one-page#s{i}">section {i}</a></p>\n'
        for i in range(20)
    )
    return (
        f"<!doctype html><html><head><title>one page</title></head><body>\n{paras}</body></html>\n"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(port: int, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the page server did not start on port {port}")


def timed(
    argv: Sequence[str], env: dict[str, str], tree: str | None = None
) -> tuple[float, float, int]:
    """(wall s, CPU s, exit status) of one run of ``argv``, its output thrown away; with
    ``tree``, in that directory with PYTHONPATH=tree."""
    if tree is not None:
        env = {**env, "PYTHONPATH": tree}
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env, cwd=tree,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=21, help="runs of each command (default: 21)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    ap.add_argument(
        "--no-pyc",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE as the environment has it",
    )
    ap.add_argument(
        "--compare", metavar="DIR", help="also time python -m crawler from the tree DIR"
    )
    args = ap.parse_args(argv)

    wget = _apt_install("wget", "wget")
    port = free_port()
    url = f"http://127.0.0.1:{port}/one-page"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), page_body()])
    pyc = tempfile.mkdtemp(prefix="startup-pyc-")
    try:
        wait_for(port)
        env = dict(os.environ)
        if not args.no_pyc:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = pyc
        crawler = crawler_command()
        py = sys.executable
        commands: dict[str, list[str]] = {
            "crawler --version": [*crawler, "--version"],
            "crawler --help": [*crawler, "--help"],
            "crawler crawl URL": [*crawler, "crawl", url, "-q", "-o", os.devnull],
            "crawler crawl URL --ignore-robots": [
                *crawler,
                "crawl",
                url,
                "-q",
                "-o",
                os.devnull,
                "--ignore-robots",
            ],  # fmt: skip
            "wget --version": [wget, "--version"],
            "wget -q -O /dev/null URL": [wget, "-q", "-O", os.devnull, url],
            "python -c pass": [py, "-c", "pass"],
            "python -c 'import asyncio'": [py, "-c", "import asyncio"],
            "python -c 'import aiohttp'": [py, "-c", "import aiohttp"],
        }
        trees: dict[str, str] = {}
        if args.compare:
            for label, tree in (("this tree", str(ROOT)), ("DIR", args.compare)):
                for what, extra in (
                    ("--version", ["--version"]),
                    ("crawl URL", ["crawl", url, "-q", "-o", os.devnull]),
                ):
                    name = f"-m crawler {what} [{label}]"
                    commands[name] = [py, "-m", "crawler", *extra]
                    trees[name] = str(Path(tree).resolve())
        for name, cmd in commands.items():  # warm-up: byte code, page cache
            _, _, code = timed(cmd, env, trees.get(name))
            if code != 0:
                raise SystemExit(f"{name} failed (exit {code}): {' '.join(cmd)}")
        load_before = os.getloadavg()
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                wall, cpu, code = timed(cmd, env, trees.get(name))
                if code != 0:
                    raise SystemExit(f"{name} failed (exit {code})")
                runs[name].append((wall, cpu))
        load_after = os.getloadavg()
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(pyc, ignore_errors=True)

    med = {
        name: (
            statistics.median(w for w, _ in rows) * 1000,
            statistics.median(c for _, c in rows) * 1000,
            min(w for w, _ in rows) * 1000,
        )
        for name, rows in runs.items()
    }
    width = max(map(len, med))
    print(
        f"{'command':{width}s} {'wall ms':>8s} {'CPU ms':>8s} {'min wall':>9s}"
        f"   (median of {args.runs})"
    )
    for name, (wall, cpu, best) in med.items():
        print(f"{name:{width}s} {wall:8.1f} {cpu:8.1f} {best:9.1f}")
    print()
    pairs = [
        ("crawler --version", "wget --version"),
        ("crawler crawl URL", "wget -q -O /dev/null URL"),
        ("crawler crawl URL --ignore-robots", "wget -q -O /dev/null URL"),
    ]
    if args.compare:
        pairs += [
            (f"-m crawler {what} [this tree]", f"-m crawler {what} [DIR]")
            for what in ("--version", "crawl URL")
        ]
    for ours, theirs in pairs:
        w, c = med[ours][0] / med[theirs][0], med[ours][1] / max(med[theirs][1], 1e-3)
        print(f"{ours} / {theirs}: {w:.1f}x wall, {c:.1f}x CPU")
    floor = med["python -c pass"]
    for name in ("crawler --version", "crawler --help", "crawler crawl URL"):
        print(f"{name} above python -c pass: {med[name][0] - floor[0]:.1f} ms wall,"
              f" {med[name][1] - floor[1]:.1f} ms CPU")  # fmt: skip
    pyc_mode = "as the environment has it" if args.no_pyc else "cached"
    print(
        f"\nload average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        f"({os.cpu_count()} CPUs); byte code: {pyc_mode}; crawler: {' '.join(crawler)}"
        + (f"; DIR: {args.compare}" if args.compare else "")
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "runs": args.runs,
                    "median_ms": {
                        n: {"wall": m[0], "cpu": m[1], "min_wall": m[2]} for n, m in med.items()
                    },
                    "load": [load_before[0], load_after[0]],
                    "pyc": not args.no_pyc,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
