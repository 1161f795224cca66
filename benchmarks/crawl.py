#!/usr/bin/env python3
"""Crawl benchmark: this crawler vs Scrapy vs ``wget --recursive --spider`` on nginx sites.

    python benchmarks/crawl.py                 # 20,000 pages (about 0.9 GB under /tmp/crawlbench)
    python benchmarks/crawl.py --quick         # the 2,000-page version
    python benchmarks/crawl.py --quick --profile   # + cProfile of our crawler, top functions
    python benchmarks/crawl.py --site all --scrapy-time-limit 60   # the three kinds of site

What it does, in one run, for each site asked for (``--site standard|dense|small|all``):
1. builds (or reuses) a static site: ``standard``, N pages of 30-60 KB with ~100 same-host
   links each (benchmarks/crawl/sitegen.py; corpus pages from ../shared/corpus/pages as
   filler); ``dense``, ~40 KB pages with ~177 links in every relative form and links to 300
   other hosts (sitegen_dense.py); ``small``, a manual of ~15 KB pages with ~21 links
   (sitegen_small.py);
2. serves it with nginx on 127.0.0.1 (nginx/wget installed with apt-get when missing, with one
   apt-get update if the first install fails; scrapy and py-spy with pip): one worker pinned
   to core 0, keep-alive, a free port, no access log but a buffered method/status/URI log;
3. runs each crawler as a subprocess pinned to core 1 (one core each), one after another,
   with a time limit. Pages are counted on the server, the same way for all: distinct URIs
   served 200 to a GET in nginx's log (wget --spider sends HEAD+GET, so stub_status's request
   count, also shown, is not a page count). CPU seconds (user+sys) and peak RSS come from
   os.wait4 on the child;
4. prints a table with ratios vs wget and vs Scrapy, by wall clock and per CPU second, the
   bar of issue 4 (ours >= 10x Scrapy pages/s, >= wget pages/s, peak RSS <= half of
   Scrapy's) and the bar of issue 9 (ours-cli, else ours: >= 2.5x wget pages/s, >= 1.5x wget
   pages per CPU second, peak RSS <= half of Scrapy's, exactly the site's pages fetched);
   with several sites, a summary line a site.
See benchmarks/CRAWL.md for figures and the profile.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "crawl"))

import sitegen  # noqa: E402
import sitegen_dense  # noqa: E402
import sitegen_small  # noqa: E402

CRAWLERS = ("ours", "scrapy", "wget")
SITES = ("standard", "dense", "small")
# pages a site kind has by default, and with --quick
DEFAULT_PAGES = {"standard": (20_000, 2000), "dense": (2000, 1000), "small": (1500, 1000)}


# ----------------------------------------------------------------- tools


def _apt_install(pkg: str, binary: str) -> str:
    found = shutil.which(binary) or (
        f"/usr/sbin/{binary}" if Path(f"/usr/sbin/{binary}").exists() else None
    )
    if found:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q", pkg]
    log(f"installing {pkg}: {' '.join(cmd)}")
    if subprocess.run(cmd, env=env, check=False).returncode != 0:
        log("apt-get install failed; running apt-get update once and retrying")
        subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-q"], env=env, check=True
        )
        subprocess.run(cmd, env=env, check=True)
    found = shutil.which(binary) or f"/usr/sbin/{binary}"
    if not Path(found).exists():
        raise SystemExit(f"{binary} not found after installing {pkg}")
    return found


def _ensure_scrapy() -> None:
    probe = [sys.executable, "-c", "import scrapy"]
    if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        return
    log("installing scrapy with pip")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "scrapy"], check=True)


def log(msg: str) -> None:
    print(f"[crawlbench] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------- nginx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pin(cores: set[int]):  # type: ignore[no-untyped-def]
    usable = os.sched_getaffinity(0)
    want = cores & usable or usable

    def pre() -> None:
        os.setsid()
        os.sched_setaffinity(0, want)

    return pre


class Nginx:
    """A foreground nginx with our own config in a temp dir, stopped on exit."""

    def __init__(
        self, binary: str, site: Path, core: int, port: int | None = None, conf: str | None = None
    ) -> None:
        """``conf``: another config than crawl/nginx.conf.tmpl, with the same placeholders
        (benchmarks/audit_million.py's generated site)."""
        self.tmp = Path(tempfile.mkdtemp(prefix="crawlbench-nginx-"))
        self.port = port or _free_port()
        conf = conf or (HERE / "crawl" / "nginx.conf.tmpl").read_text()
        # As root, nginx's workers would run as "nobody" and could not read a site under a
        # private directory (pytest's tmp_path): run them as the invoking user instead.
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
        subs = {"TMP": str(self.tmp), "PORT": str(self.port), "ROOT": str(site), "USER": user}
        for key, val in subs.items():
            conf = conf.replace(f"@@{key}@@", val)
        (self.tmp / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            [
                binary,
                "-p",
                str(self.tmp),
                "-c",
                str(self.tmp / "nginx.conf"),
                "-e",
                str(self.tmp / "error.log"),
            ],
            preexec_fn=_pin({core}),
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                self.requests()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"nginx did not start; see {self.tmp}/error.log") from None
                time.sleep(0.05)

    def requests(self) -> int:
        """nginx's total request counter (this status request included)."""
        with urllib.request.urlopen(self.base + "/__nginx_status", timeout=5) as r:
            text = r.read().decode()
        # "Active connections: 1\nserver accepts handled requests\n 5 5 9\nReading: ..."
        return int(text.splitlines()[2].split()[2])

    def cpu(self) -> float:
        """CPU seconds (user+sys) used so far by nginx's master and worker processes."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            # fields[1] is the ppid, fields[11]/[12] utime/stime (stat fields 4, 14, 15)
            if int(entry) == self.proc.pid or int(fields[1]) == self.proc.pid:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def log_size(self) -> int:
        path = self.tmp / "pages.log"
        return path.stat().st_size if path.exists() else 0

    def log_since(self, offset: int) -> list[str]:
        """Access-log lines written after ``offset``, once nginx's 1 s log buffer has flushed."""
        time.sleep(1.2)
        size = -1
        while size != self.log_size():  # until the flushes stop
            size = self.log_size()
            time.sleep(1.2)
        with open(self.tmp / "pages.log", "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace").splitlines()

    def errors(self) -> list[str]:
        """error.log lines at level error or worse (a benchmark with them is not valid)."""
        path = self.tmp / "error.log"
        if not path.exists():
            return []
        bad = ("[error]", "[crit]", "[alert]", "[emerg]")
        return [
            ln for ln in path.read_text(errors="replace").splitlines() if any(b in ln for b in bad)
        ]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


# ----------------------------------------------------------------- runs


@dataclass
class Run:
    name: str
    cmd: list[str]
    pages: int = 0  # distinct URIs served 200 to a GET in this run (from nginx's log)
    gets: int = 0  # GET requests (a page fetched twice counts twice)
    requests: int = 0  # every request (stub_status), HEADs and errors included
    non_200: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    server_cpu: float = 0.0  # nginx's CPU seconds during the run
    rss_mb: float = 0.0  # peak RSS of the crawler process (VmHWM)
    ru_maxrss_mb: float = 0.0
    exit: int | None = None
    timed_out: bool = False
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    child: dict[str, object] = field(default_factory=dict)
    profile: str | None = None

    @property
    def rate(self) -> float:
        return self.pages / self.wall if self.wall > 0 else 0.0


def _vm_hwm(pid: int) -> int:
    """Peak resident set of a live process in KiB (0 once it has exited)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def run_one(run: Run, nginx: Nginx, core: int, limit: float, workdir: Path) -> Run:
    """Run one crawler to its end (or the limit), pinned to ``core``; measure it."""
    run.load = os.getloadavg()
    before = nginx.requests()
    log_at = nginx.log_size()
    server_cpu0 = nginx.cpu()
    out_path = workdir / f"{run.name}.out"
    err_path = workdir / f"{run.name}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        if PYCACHE is not None:  # see byte_code_cache()
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
        proc = subprocess.Popen(
            run.cmd, stdout=out, stderr=err, cwd=workdir, env=env, preexec_fn=_pin({core})
        )
        deadline = t0 + limit + 15  # the crawler's own limit first, then ours
        ru = None
        status = 0
        signalled = 0
        hwm = 0
        try:
            while ru is None:
                hwm = max(hwm, _vm_hwm(proc.pid))
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    ru = usage
                    break
                now = time.perf_counter()
                if now > deadline and signalled < 2:
                    run.timed_out = True
                    os.killpg(proc.pid, signal.SIGTERM if signalled == 0 else signal.SIGKILL)
                    signalled += 1
                    deadline = now + 5
                time.sleep(0.02)
        except BaseException:  # Ctrl-C: the child has its own session, so end it here
            os.killpg(proc.pid, signal.SIGKILL)
            os.waitpid(proc.pid, 0)
            raise
        run.wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    run.server_cpu = nginx.cpu() - server_cpu0
    after = nginx.requests()
    run.requests = after - before - 1  # minus this status request
    lines = [ln.split(" ", 2) for ln in nginx.log_since(log_at)]
    gets = [p for p in lines if len(p) == 3 and p[0] == "GET"]
    run.gets = len(gets)
    run.pages = len({p[2] for p in gets if p[1] == "200"})
    run.non_200 = sum(1 for p in lines if len(p) == 3 and p[1] != "200")
    run.exit = proc.returncode
    run.cpu = ru.ru_utime + ru.ru_stime
    # ru_maxrss of a child counts the pages it shared with this (bigger) process between
    # fork and exec, so it is never below our own RSS; VmHWM, polled while the child runs,
    # is the peak of the exec'd program alone. ru_maxrss is kept for reference.
    run.ru_maxrss_mb = ru.ru_maxrss / 1024  # KiB on Linux
    run.rss_mb = hwm / 1024 if hwm else run.ru_maxrss_mb
    text = out_path.read_text(errors="replace").strip().splitlines()
    if text:
        try:
            run.child = json.loads(text[-1])
        except ValueError:
            pass
    if run.child.get("finish_reason") == "closespider_timeout" or run.child.get("cancelled"):
        run.timed_out = True
    if run.exit not in (0, None) and run.name != "wget":  # wget exits 8 on any 404 etc.
        log(
            f"{run.name} exited {run.exit}; stderr tail:\n"
            + err_path.read_text(errors="replace")[-2000:]
        )
    return run


PYCACHE: Path | None = None


def byte_code_cache(site_dir: Path) -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (it is on the benchmark machine), every Python
    crawler would compile the project's modules from source at each start, as no installed
    copy does (pip writes the .pyc files): the runs get a byte-code cache under ``site_dir``
    (PYTHONPYCACHEPREFIX), filled once here with compileall before the first run."""
    global PYCACHE
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    PYCACHE = site_dir / "pycache"
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    env.pop("PYTHONDONTWRITEBYTECODE")
    cmd = [sys.executable, "-m", "compileall", "-q", str(ROOT / "crawler"), str(HERE / "crawl")]
    subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL)
    log(f"byte code cached in {PYCACHE} (PYTHONDONTWRITEBYTECODE is set here)")


def commands(
    names: list[str], url: str, conc: int, limit: float, wget: str, workdir: Path
) -> list[Run]:
    py = sys.executable
    runs = []
    for name in names:
        if name == "ours":
            cmd = [
                py,
                str(HERE / "crawl" / "run_ours.py"),
                url,
                "--concurrency",
                str(conc),
                "--time-limit",
                str(limit),
            ]
        elif name == "ours-gc":  # experiment: the same with the cyclic GC tuned
            cmd = [py, str(HERE / "crawl" / "run_ours.py"), url, "--concurrency", str(conc),
                   "--time-limit", str(limit), "--gc-tuned"]  # fmt: skip
        elif name in ("ours-cli", "ours-aiohttp"):
            # ours-aiohttp: the same command with every request through aiohttp (A/B of
            # crawler.http.http1); env(1) execs in place, so wait4 still measures the crawler
            cmd = ["env", "CRAWLER_NO_PLAIN_HTTP=1"] if name == "ours-aiohttp" else []
            cmd += [
                py,
                "-m",
                "crawler",
                "crawl",
                url,
                "--ignore-robots",
                "--concurrency",
                str(conc),
                "--per-host",
                str(conc),
                "--max-depth",
                "1000",
                "--output",
                os.devnull,
                "--quiet",
            ]
        elif name == "scrapy":
            cmd = [
                py,
                str(HERE / "crawl" / "scrapy_spider.py"),
                url,
                "--concurrency",
                str(conc),
                "--time-limit",
                str(limit),
            ]
        elif name == "wget":
            cmd = [
                wget,
                "--recursive",
                "--spider",
                "--level=inf",
                "--no-verbose",
                "-e",
                "robots=off",
                "--directory-prefix",
                str(workdir / "wget"),
                "--output-file",
                str(workdir / "wget.log"),
                url,
            ]
        else:
            raise SystemExit(
                f"unknown crawler {name!r}; choose from "
                f"{CRAWLERS + ('ours-cli', 'ours-aiohttp', 'ours-gc')}"
            )
        runs.append(Run(name, cmd))
    return runs


# ----------------------------------------------------------------- report


def describe_tree() -> str:
    """The commit measured and which extractor implementation it loads."""

    def out(cmd: list[str]) -> str:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
        return res.stdout.strip() or f"? ({res.returncode})"

    head = out(["git", "rev-parse", "--short", "HEAD"])
    dirty = out(["git", "status", "--porcelain", "--untracked-files=no", "--", "crawler"])
    impl = out([sys.executable, "-c", "import crawler.extract as e; print(e.IMPLEMENTATION)"])
    state = "uncommitted changes in crawler/" if dirty and not dirty.startswith("?") else "clean"
    return f"tree: {head} ({state}); extractor implementation: {impl}"


def _per_cpu(r: Run) -> float:
    return r.pages / r.cpu if r.cpu > 0 else 0.0


def table(runs: list[Run], n: int) -> str:
    """The side-by-side table, then the bars of issue 4 and issue 9 (for ours)."""
    by = {r.name: r for r in runs}
    scrapy, wget = by.get("scrapy"), by.get("wget")
    cols = [
        ("crawler", 10), ("pages", 7), ("GETs", 7), ("reqs", 7), ("wall s", 8), ("pages/s", 9),
        ("CPU s", 8), ("pages/CPU s", 11), ("nginx CPU s", 11), ("peak RSS MB", 12),
        ("x wget p/s", 10), ("x wget p/CPU", 12), ("x Scrapy p/s", 12), ("x Scrapy p/CPU", 14),
        ("RSS/Scrapy", 10), ("note", 0),
    ]  # fmt: skip

    def row(values: list[str]) -> str:
        pairs = zip(values, cols, strict=True)
        cells = [v.ljust(w) if i == 0 else v.rjust(w) for i, (v, (_, w)) in enumerate(pairs)]
        return " ".join(cells)

    def ratio(a: float, b: float, fmt: str = ".2f") -> str:
        return f"{a / b:{fmt}}" if b else "-"

    head = row([c for c, _ in cols])
    lines = [head, "-" * len(head)]
    for r in runs:
        notes = []
        if r.timed_out:
            notes.append("time-limited")
        if r.pages != n and not r.timed_out:
            notes.append(f"expected {n}")
        if r.non_200:
            notes.append(f"{r.non_200} non-200")
        if r.exit is not None and r.exit < 0 and not r.timed_out:
            notes.append(f"died of signal {-r.exit}")
        elif r.exit and r.name != "wget":
            notes.append(f"exit {r.exit}")
        notes.append(f"load {r.load[0]:.2f}")
        lines.append(
            row(
                [
                    r.name,
                    str(r.pages),
                    str(r.gets),
                    str(r.requests),
                    f"{r.wall:.2f}",
                    f"{r.rate:.1f}",
                    f"{r.cpu:.2f}",
                    f"{_per_cpu(r):.0f}",
                    f"{r.server_cpu:.2f}",
                    f"{r.rss_mb:.1f}",
                    ratio(r.rate, wget.rate) if wget else "-",
                    ratio(_per_cpu(r), _per_cpu(wget)) if wget else "-",
                    ratio(r.rate, scrapy.rate, ".1f") if scrapy else "-",
                    ratio(_per_cpu(r), _per_cpu(scrapy), ".1f") if scrapy else "-",
                    ratio(r.rss_mb, scrapy.rss_mb) if scrapy else "-",
                    " " + ", ".join(notes),
                ]
            )
        )
    lines += bars(runs, n)
    return "\n".join(lines)


def bars(runs: list[Run], n: int) -> list[str]:
    """Issue 4's bar (vs Scrapy and wget, wall clock) and issue 9's (wall and CPU vs wget)."""
    by = {r.name: r for r in runs}
    scrapy, wget = by.get("scrapy"), by.get("wget")
    lib = by.get("ours") or by.get("ours-cli")
    if not lib:
        return []
    ours = lib
    rss: tuple[str, bool] | None = None
    if scrapy and scrapy.rss_mb:
        rss = (
            f"<= 1/2 Scrapy peak RSS ({ours.rss_mb / scrapy.rss_mb:.2f}x)",
            ours.rss_mb <= scrapy.rss_mb / 2,
        )
    out = []
    if scrapy and wget and scrapy.rate and wget.rate and rss:
        checks = [
            (
                f">= 10x Scrapy pages/s ({ours.rate / scrapy.rate:.1f}x)",
                ours.rate >= 10 * scrapy.rate,
            ),
            (f">= wget pages/s ({ours.rate / wget.rate:.2f}x)", ours.rate >= wget.rate),
            rss,
            (f"all {n} pages fetched ({ours.pages})", ours.pages == n),
        ]
        out.append(
            "bar (issue 4): "
            + "; ".join(f"{'PASS' if ok else 'FAIL'} {text}" for text, ok in checks)
        )
    # Issue 9's bar is about what a user runs: the command line when it was measured.
    ours = by.get("ours-cli") or lib
    exact = ours.pages == n and ours.gets == n and ours.non_200 == 0 and not ours.timed_out
    fetched = (f"exactly the site's {n} pages fetched ({ours.pages} pages, {ours.gets} GETs, "
               f"{ours.non_200} non-200)", exact)  # fmt: skip
    if scrapy and scrapy.rss_mb:
        rss = (
            f"<= 1/2 Scrapy peak RSS ({ours.rss_mb / scrapy.rss_mb:.2f}x)",
            ours.rss_mb <= scrapy.rss_mb / 2,
        )
    if wget and wget.rate and _per_cpu(wget):
        xw, xc = ours.rate / wget.rate, _per_cpu(ours) / _per_cpu(wget)
        checks = [
            (f">= 2.5x wget pages/s ({xw:.2f}x)", xw >= 2.5),
            (f">= 1.5x wget pages per CPU s ({xc:.2f}x)", xc >= 1.5),
            *([rss] if rss else []),
            fetched,
        ]
        out.append(
            f"bar (issue 9, {ours.name}): "
            + "; ".join(f"{'PASS' if ok else 'FAIL'} {text}" for text, ok in checks)
            + ("" if rss else "; (no Scrapy run: RSS not compared)")
        )
    return out


def profile_report(path: str, top: int = 30) -> str:
    import io  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    buf = io.StringIO()
    st = pstats.Stats(path, stream=buf)
    st.strip_dirs().sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def pyspy_report(path: str, top: int = 25) -> str:
    """Self and inclusive shares of py-spy's collapsed stacks, grouped by function."""
    import re  # noqa: PLC0415
    from collections import Counter  # noqa: PLC0415

    strip = re.compile(r" \((?:.*/)?([^/]+?):\d+\)$")
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    if not Path(path).exists():
        return f"no profile written at {path}"
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [strip.sub(r" (\1)", f) for f in stack.split(";")]
        k = int(count)
        total += k
        self_c[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    if not total:
        return "no samples"
    out = [f"{total} samples", "", "self %  function (file)"]
    out += [f"{100 * c / total:6.1f}  {f}" for f, c in self_c.most_common(top)]
    out += ["", "incl %  function (file)"]
    out += [f"{100 * c / total:6.1f}  {f}" for f, c in incl.most_common(top)]
    return "\n".join(out)


def build(kind: str, n: int, seed: int, site_dir: Path) -> tuple[Path, int, int | None]:
    """Build (or reuse) one site: (root, total bytes, the port it must be served on or None)."""
    if kind == "standard":
        root = site_dir / f"site-{n}-s{seed}"
        return root, sitegen.build_site(root, n, seed).total_bytes, None
    if kind == "small":
        root = site_dir / f"small-{n}-s{seed}"
        return root, sitegen_small.build_site(root, n, seed).total_bytes, None
    # The dense site writes its host and port into its links: reuse the last build's port
    # when it is free, otherwise build again for a free one.
    root = site_dir / f"dense-{n}-s{seed}"
    port = None
    host = sitegen_dense.stamped_host(root)
    if host and host.startswith("127.0.0.1:"):
        old = int(host.rsplit(":", 1)[1])
        try:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", old))
            port = old
        except OSError:
            pass
    port = port or _free_port()
    info = sitegen_dense.build_site(root, n, seed, host=f"127.0.0.1:{port}")
    return root, info.total_bytes, port


@dataclass
class SiteRun:
    kind: str
    n: int
    total_bytes: int
    runs: list[Run]
    server_errors: list[str]


def run_site(
    args: argparse.Namespace, kind: str, n: int, names: list[str], nginx_bin: str, wget_bin: str
) -> SiteRun:
    t0 = time.perf_counter()
    site_root, total, port = build(kind, n, args.seed, Path(args.site_dir))
    log(
        f"{kind} site: {n} pages, {total / 1e6:.0f} MB at {site_root} "
        f"({time.perf_counter() - t0:.1f}s)"
    )
    nginx = Nginx(nginx_bin, site_root, args.nginx_core, port)
    workdir = Path(tempfile.mkdtemp(prefix="crawlbench-run-"))
    runs: list[Run] = []
    suffix = "" if len(args.sites) == 1 else f".{kind}"
    try:
        url = nginx.base + "/"
        # Warm the page cache so the first crawler does not pay for disk reads.
        for f in site_root.rglob("*.html"):
            f.read_bytes()
        for run in commands(names, url, args.concurrency, args.time_limit, wget_bin, workdir):
            limit = args.time_limit
            if run.name == "scrapy" and args.scrapy_time_limit is not None:
                limit = args.scrapy_time_limit
                run.cmd[run.cmd.index("--time-limit") + 1] = str(limit)
            log(f"running {run.name}: {' '.join(run.cmd)}")
            run_one(run, nginx, args.crawler_core, limit, workdir)
            log(f"  {run.name}: {run.pages} pages in {run.wall:.1f}s, child says {run.child}")
            runs.append(run)
        if args.profile:
            prof = Path(args.profile + suffix)
            prof.parent.mkdir(parents=True, exist_ok=True)
            cmd = [
                sys.executable,
                "-m",
                "cProfile",
                "-o",
                str(prof),
                str(HERE / "crawl" / "run_ours.py"),
                url,
                "--concurrency",
                str(args.concurrency),
                "--time-limit",
                str(args.time_limit),
            ]
            prun = Run("ours+cProfile", cmd, profile=str(prof))
            log(f"running {prun.name}: {' '.join(cmd)}")
            run_one(prun, nginx, args.crawler_core, args.time_limit, workdir)
            runs.append(prun)
        if args.py_spy:
            spy = shutil.which("py-spy")
            if spy is None:
                subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True)
                spy = shutil.which("py-spy") or "py-spy"
            prof = Path(args.py_spy + suffix)
            prof.parent.mkdir(parents=True, exist_ok=True)
            # --native needs the target paused while sampling (py-spy refuses --nonblocking).
            native = ["--native"] if args.native else ["--nonblocking"]
            cmd = [spy, "record", *native, "--rate", "250", "--format", "raw",
                   "--output", str(prof), "--", sys.executable,
                   str(HERE / "crawl" / "run_ours.py"), url, "--concurrency", str(args.concurrency),
                   "--time-limit", str(args.time_limit)]  # fmt: skip
            srun = Run("ours+py-spy", cmd, profile=str(prof))
            log(f"running {srun.name}: {' '.join(cmd)}")
            run_one(srun, nginx, args.crawler_core, args.time_limit, workdir)
            runs.append(srun)
    finally:
        server_errors = nginx.errors()
        nginx.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return SiteRun(kind, n, total, runs, server_errors)


def report(args: argparse.Namespace, site: SiteRun) -> None:
    n, runs = site.n, site.runs
    print(
        f"\n{site.kind} site: {n} pages ({site.total_bytes / n / 1000:.1f} KB average), "
        f"nginx 1 worker on core {args.nginx_core}, each crawler pinned to core "
        f"{args.crawler_core}, concurrency {args.concurrency} "
        f"(wget: 1 connection); {os.cpu_count()} CPUs, load average at start of each run "
        "in the note"
    )
    print(table([r for r in runs if r.profile is None], n))
    for r in runs:
        if r.profile:
            print(
                f"\n{r.name}: {r.pages} pages in {r.wall:.1f}s "
                f"({r.rate:.0f} pages/s under the profiler); "
                f"profile {r.profile}\n"
            )
            if r.name.endswith("py-spy"):
                print(pyspy_report(r.profile))
            else:
                print(profile_report(r.profile))
    if site.server_errors:
        print(f"\nWARNING: nginx logged {len(site.server_errors)} errors; the figures are suspect:")
        print("\n".join(site.server_errors[:10]))


def summary(sites: list[SiteRun]) -> str:
    """One line a site: ours against wget and Scrapy, wall clock and per CPU second."""
    lines = [
        "ours: ours-cli when it ran, else ours (the bar of issue 9 uses the same)",
        "site      pages  links/page  ours p/s  wget p/s  x wget p/s  x wget p/CPU  "
        "x Scrapy p/s  x Scrapy p/CPU  RSS/Scrapy  exact",
    ]
    links = {"standard": "~104", "dense": "~177", "small": "~21"}
    for s in sites:
        by = {r.name: r for r in s.runs if r.profile is None}
        ours = by.get("ours-cli") or by.get("ours")  # as issue 9's bar
        if ours is None:
            continue
        wget, scrapy = by.get("wget"), by.get("scrapy")

        def rt(a: float, b: float, fmt: str = ".2f") -> str:
            return f"{a / b:{fmt}}" if b else "-"

        exact = ours.pages == s.n and ours.gets == s.n and ours.non_200 == 0
        lines.append(
            f"{s.kind:<9}{s.n:>6}  {links.get(s.kind, '?'):>10}  {ours.rate:>8.0f}  "
            f"{(wget.rate if wget else 0):>8.0f}  "
            f"{rt(ours.rate, wget.rate) if wget else '-':>10}  "
            f"{rt(_per_cpu(ours), _per_cpu(wget)) if wget else '-':>12}  "
            f"{rt(ours.rate, scrapy.rate, '.1f') if scrapy else '-':>12}  "
            f"{rt(_per_cpu(ours), _per_cpu(scrapy), '.1f') if scrapy else '-':>14}  "
            f"{rt(ours.rss_mb, scrapy.rss_mb) if scrapy else '-':>10}  "
            f"{'yes' if exact else 'NO':>5}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--site",
        default="standard",
        help="comma list of standard,dense,small, or all (default standard)",
    )
    ap.add_argument(
        "--pages",
        type=int,
        default=None,
        help="site size for every --site (default: standard 20000, dense 2000, small 1500; "
        "with --quick 2000, 1000, 1000)",
    )
    ap.add_argument("--quick", action="store_true", help="the smaller sites (see --pages)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--concurrency", type=int, default=16, help="ours and Scrapy (wget: 1 connection)"
    )
    ap.add_argument(
        "--crawlers",
        default=",".join(CRAWLERS),
        help="comma list: ours,ours-cli,ours-aiohttp,ours-gc,scrapy,wget",
    )
    ap.add_argument("--time-limit", type=float, default=600, help="seconds per crawler run")
    ap.add_argument("--scrapy-time-limit", type=float, default=None, help="default: --time-limit")
    ap.add_argument("--site-dir", default="/tmp/crawlbench", help="where sites are built (reused)")
    ap.add_argument("--crawler-core", type=int, default=1)
    ap.add_argument("--nginx-core", type=int, default=0)
    ap.add_argument(
        "--profile",
        nargs="?",
        const="/tmp/crawlbench/ours.prof",
        default=None,
        help="also run ours under cProfile (output file; default %(const)s; "
        "with several sites, .KIND is appended)",
    )
    ap.add_argument(
        "--py-spy",
        nargs="?",
        const="/tmp/crawlbench/ours.pyspy.txt",
        default=None,
        help="also run ours under py-spy (sampling, collapsed stacks; default %(const)s)",
    )
    ap.add_argument(
        "--native", action="store_true", help="py-spy: include native (C/Cython) frames"
    )
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args(argv)
    # SIGTERM ends the run like Ctrl-C does: the running crawler and nginx are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    kinds = [k.strip() for k in args.site.split(",") if k.strip()]
    args.sites = list(SITES) if kinds == ["all"] else kinds
    for k in args.sites:
        if k not in SITES:
            raise SystemExit(f"unknown site {k!r}; choose from {', '.join(SITES)} or all")
    names = [c.strip() for c in args.crawlers.split(",") if c.strip()]

    nginx_bin = _apt_install("nginx", "nginx")
    wget_bin = _apt_install("wget", "wget") if "wget" in names else "wget"
    if "scrapy" in names:
        _ensure_scrapy()

    tree = describe_tree()  # before the runs: the tree may change while they run
    byte_code_cache(Path(args.site_dir))
    sites: list[SiteRun] = []
    for kind in args.sites:
        n = args.pages or DEFAULT_PAGES[kind][1 if args.quick else 0]
        sites.append(run_site(args, kind, n, names, nginx_bin, wget_bin))

    print(f"\n{tree}")
    for site in sites:
        report(args, site)
    print(
        "\npages: distinct URIs served 200 to a GET (nginx log); GETs: all GET requests; "
        "reqs: all requests (nginx stub_status; wget --spider sends a HEAD before each GET);\n"
        "pages/s = pages / wall s; p/CPU = pages per CPU second (user+sys of the crawler "
        "process); peak RSS: VmHWM of the crawler process"
    )
    if len(sites) > 1:
        print("\n" + summary(sites))
    if args.json:
        data: dict[str, object] = {
            "sites": [
                {
                    "site": s.kind,
                    "pages": s.n,
                    "total_bytes": s.total_bytes,
                    "server_errors": s.server_errors,
                    "runs": [{**asdict(r), "rate": r.rate} for r in s.runs],
                }
                for s in sites
            ]
        }
        first = data["sites"][0]  # type: ignore[index]
        data.update(pages=first["pages"], runs=first["runs"])  # the one-site layout of before
        Path(args.json).write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
