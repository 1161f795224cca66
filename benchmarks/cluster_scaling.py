#!/usr/bin/env python3
"""Cluster scaling benchmark (issue 23): N crawler workers, each in its own cgroup with a CPU
quota (N small machines on one box), on one Redis, against one process with the state in
memory under the same quota; with and without a delaying proxy in front of Redis.

    python benchmarks/cluster_scaling.py                        # 16 origins; N = 1,2,4,8,16; rtt 0
    python benchmarks/cluster_scaling.py --rtt 0,0.25,1 --repeat 3 --json out.json
    python benchmarks/cluster_scaling.py --tree /work/wt-cluster23   # another checkout
    python benchmarks/cluster_scaling.py --quick                # 4 origins, N = 1,2, quota 0.2
    python benchmarks/cluster_scaling.py --origins 1 --workers 1,2,4   # one hot origin
    python benchmarks/cluster_scaling.py --origins 1 --workers 4 --host-split 4  # its parts given

What it does (benchmarks/CLUSTER.md has the figures and why each choice):
1. The site: the PostgreSQL 15 manual (Debian ``postgresql-doc-15``, 1,169 HTML pages, installed
   with apt-get when missing) served by one nginx on ``--origins`` loopback addresses
   127.0.0.1 .. 127.0.0.K, one port: K hosts, so K politeness keys; every origin's
   ``/index.html`` is a seed. ``--cross-links``: nginx's ``sub_filter`` rewrites every
   ``href="sql-`` link of origin k to origin k+1 (mod K), so links travel between the hosts'
   owners. nginx logs ``$msec``, the worker (an ``X-Worker`` request header each worker sends),
   method, status, host and URI of every request.
2. One redis-server (tests/redisserver.py: AOF everysec, no RDB), FLUSHALL + CONFIG RESETSTAT
   before each run. ``--rtt MS`` > 0: the workers reach it through benchmarks/tcp_delay.py
   (``rtt/2`` each way, order kept, no bandwidth limit); the round trip the workers see (the
   median of 300 PINGs) is measured through it and printed.
3. Each worker runs in a cgroup of its own with ``--quota`` of a core (cgroup v1
   ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` + cpuacct, or v2 ``cpu.max`` + ``cpu.stat``,
   detected) and high ``cpu.shares``/``cpu.weight``, so that under the other users' load a
   worker still gets its quota; redis-server, nginx and the proxy are reniced to -20 (both:
   ``--no-priority`` to leave them alone). The first worker gets the seeds (``crawler crawl
   URLS --state redis://... --ignore-robots -c 16 --per-host 16 --max-depth 1000 -o /dev/null
   --quiet``); the others join (no URL) once nginx served its first request. ``memory``: the
   same command without ``--state``, one process, same quota.
4. Measured, from nginx's log and samples taken every 0.1 s of every cgroup's CPU usage and of
   Redis' ``INFO cpu``/``commandstats``: pages (distinct URLs served 200 to a GET), duplicates
   (GETs - pages); the steady window, from the moment every worker has made a request to the
   moment 95% of the GETs are done (start-up of the joiners and the drain at the end left out);
   pages/s in it; efficiency = pages/s / (N x the one-worker run's, same rtt); worker CPU ms a
   page, "busy" (worker CPU / (N x quota x window): 1.0 = quota-bound), Redis CPU ms and Redis
   commands a page, all in the window; and the whole run's figures beside them.
5. Prints every run, the medians over ``--repeat``, and issue 23's bars.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import redis_workers  # noqa: E402  (its Redis: redis-server + INFO helpers; loads crawl.py)
from cluster_cgroups import CpuCgroups  # noqa: E402
from cluster_site import DOC_DIR, MultiOriginNginx, ensure_manual  # noqa: E402

SAMPLE_S = 0.1
# nice of redis-server, nginx and the proxy (--no-priority: unchanged). -20, not -10: at -10
# the runs of 16 workers varied 2x under load 10-14 from the other sessions (Redis and nginx
# waited for a core); what they use is bounded by what the quota-limited workers drive.
NICE = -20
WINDOW_END = 0.95


def log(msg: str) -> None:
    print(f"[clusterbench] {msg}", file=sys.stderr, flush=True)


def renice(pid: int, prio: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, prio)
    except OSError as e:
        log(f"renice {pid} to {prio}: {e}")


class DelayProxy:
    """benchmarks/tcp_delay.py in front of Redis, adding ``rtt_ms`` to the round trip.

    The proxy's own hop (two more loopback sends and a Python event loop each way) costs about
    0.2 ms of round trip on this machine besides the delay asked for. So the proxy is started,
    its added round trip measured against Redis directly (the median of 300 PINGs each way:
    a median, because the other users' load makes the mean jump), and started again once with
    the delay less that overshoot, by at most half the delay asked for: the added round trip
    the workers see is then close to ``rtt_ms`` (``added_ms`` says what it was)."""

    def __init__(self, redis_port: int, rtt_ms: float, priority: bool) -> None:
        self.redis_port, self.priority = redis_port, priority
        self._start(rtt_ms)
        over = ping_ms(self.port) - ping_ms(redis_port) - rtt_ms
        if over > 0.02:
            self.stop()
            self._start(rtt_ms - min(over, rtt_ms / 2))
        self.added_ms = ping_ms(self.port) - ping_ms(redis_port)

    def _start(self, delay_ms: float) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "tcp_delay.py"),
                "--listen",
                "127.0.0.1:0",
                "--to",
                f"127.0.0.1:{self.redis_port}",
                "--rtt-ms",
                f"{delay_ms:.4f}",
            ],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # "listening HOST:PORT"
        if not line.startswith("listening "):
            self.stop()
            raise SystemExit(f"tcp_delay.py did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        if self.priority:
            renice(self.proc.pid, NICE)

    def cpu_s(self) -> float:
        """The proxy's CPU seconds so far (user+sys, /proc)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def ping_ms(port: int, n: int = 300) -> float:
    """The median round trip of ``n`` PINGs to a Redis on ``port`` (one connection, one at a
    time, 2 ms apart as ``redis-cli --latency`` spaces them 10 ms apart), in ms."""
    trips = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            t = time.perf_counter()
            s.sendall(b"PING\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    raise OSError("Redis closed the connection")
                reply += chunk
            trips.append(1000 * (time.perf_counter() - t))
            time.sleep(0.002)
    return statistics.median(trips)


class Sampler(threading.Thread):
    """Every SAMPLE_S: (time, each cgroup's CPU seconds, Redis CPU seconds, Redis calls)."""

    def __init__(self, groups: CpuCgroups, redis: Any) -> None:
        super().__init__(daemon=True)
        self.groups = groups
        self.client = redis.client
        self.samples: list[tuple[float, list[float], float, int]] = []
        self.stopping = threading.Event()

    def take(self) -> None:
        info = self.client.info("cpu")
        cpu = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        stats = self.client.info("commandstats")
        calls = sum(
            int(v["calls"])
            for k, v in stats.items()
            if k.removeprefix("cmdstat_") not in redis_workers.DRIVER_COMMANDS
        )
        self.samples.append((time.time(), self.groups.usage_s(), cpu, calls))

    def run(self) -> None:
        while not self.stopping.wait(SAMPLE_S):
            self.take()

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        self.take()

    def at(self, t: float) -> tuple[float, float, int]:
        """(all workers' CPU s, Redis CPU s, Redis calls) at time t, interpolated."""
        s = self.samples
        if t <= s[0][0]:
            return sum(s[0][1]), s[0][2], s[0][3]
        for a, b in zip(s, s[1:], strict=False):
            if a[0] <= t <= b[0]:
                f = (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0.0
                w = sum(a[1]) + f * (sum(b[1]) - sum(a[1]))
                return w, a[2] + f * (b[2] - a[2]), round(a[3] + f * (b[3] - a[3]))
        return sum(s[-1][1]), s[-1][2], s[-1][3]


@dataclass
class Result:
    mode: str  # "redis" or "memory"
    workers: int
    rtt_ms: float
    quota: float
    pages: int = 0
    gets: int = 0
    distinct: int = 0  # distinct URLs requested, any status (dup = gets - distinct)
    window_s: float = 0.0
    window_gets: int = 0
    joined_at: float = 0.0  # share of the GETs done when every worker had made a request
    crawl_s: float = 0.0  # first GET to last GET
    wall_s: float = 0.0  # first start to last exit
    worker_cpu_window_s: float = 0.0
    worker_cpu_s: float = 0.0  # all cgroups, the whole run (start-up included)
    worker_cpu_wait4_s: float = 0.0
    redis_cpu_window_s: float = 0.0
    redis_cpu_s: float = 0.0
    redis_calls_window: int = 0
    redis_calls: int = 0
    redis_by_command: dict[str, int] = field(default_factory=dict)
    per_worker_gets: list[int] = field(default_factory=list)
    nginx_cpu_s: float = 0.0
    proxy_cpu_s: float = 0.0  # tcp_delay.py's CPU seconds during the run (rtt > 0)
    exits: list[int] = field(default_factory=list)
    timed_out: bool = False
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    latency_ms: float = 0.0  # median PING round trip through the path the workers use
    added_ms: float = 0.0  # what the proxy added to it (latency through it - directly)
    note: str = ""

    @property
    def rate(self) -> float:
        return self.window_gets / self.window_s if self.window_s > 0 else 0.0

    @property
    def crawl_rate(self) -> float:
        return self.pages / self.crawl_s if self.crawl_s > 0 else 0.0

    def per_page_ms(self, seconds: float) -> float:
        return 1000 * seconds / self.window_gets if self.window_gets else 0.0

    @property
    def busy(self) -> float:
        full = self.workers * self.quota * self.window_s
        return self.worker_cpu_window_s / full if full else 0.0


def commands(
    mode: str, n: int, seeds: list[str], state_url: str, args: argparse.Namespace
) -> list[list[str]]:
    base = ["--ignore-robots", "-c", str(args.concurrency), "--per-host", str(args.per_host)]
    base += ["--max-depth", "1000", "--output", os.devnull, "--quiet"]
    py = [sys.executable, "-m", "crawler", "crawl"]
    if mode == "memory":
        return [[*py, *seeds, *base, "--header", "X-Worker: 0"]]
    state = ["--state", state_url]
    if args.host_split is not None:  # (a crawler before the split has no such option)
        state += ["--host-split", str(args.host_split)]
    return [
        [*py, *(seeds if i == 0 else []), *state, *base, "--header", f"X-Worker: {i}"]
        for i in range(n)
    ]


def run_one(
    mode: str,
    n: int,
    rtt: float,
    args: argparse.Namespace,
    nginx: MultiOriginNginx,
    redis: Any,
    workdir: Path,
) -> Result:
    res = Result(mode, n, rtt if mode == "redis" else 0.0, args.quota, load=os.getloadavg())
    redis.reset()
    proxy = DelayProxy(redis.port, rtt, args.priority) if (rtt > 0 and mode == "redis") else None
    state_url = f"redis://127.0.0.1:{proxy.port if proxy else redis.port}/0"
    if mode == "redis":
        res.latency_ms = ping_ms(proxy.port if proxy else redis.port)
        res.added_ms = proxy.added_ms if proxy else 0.0
        redis.reset()
    cmds = commands(mode, n, nginx.seeds, state_url, args)
    env = {**os.environ, "PYTHONPATH": str(args.tree)}
    groups = CpuCgroups(f"clusterbench-{os.getpid()}", n, args.quota)
    sampler = Sampler(groups, redis)
    log_at = nginx.log_size()
    nginx_cpu0 = nginx.cpu()
    before = nginx.requests()
    procs: list[subprocess.Popen[bytes]] = []
    usage: dict[int, Any] = {}
    statuses: dict[int, int] = {}
    files = []
    proxy_cpu0 = proxy.cpu_s() if proxy else 0.0
    sampler.take()
    sampler.start()
    t0 = time.time()
    deadline = time.monotonic() + args.time_limit
    try:
        for i, cmd in enumerate(cmds):
            if i == 1:  # the crawl exists in Redis once the first worker made a request
                while nginx.requests() - before < 2 and time.monotonic() < deadline:
                    if procs[0].poll() is not None:
                        break
                    time.sleep(0.01)
            out = open(workdir / f"{mode}-{n}-{i}.err", "wb")  # noqa: SIM115
            files.append(out)
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                    cwd=args.tree,
                    env=env,
                    preexec_fn=groups.enter_fn(i),  # noqa: PLW1509  (a fresh child, single-threaded)
                )
            )
        while len(usage) < len(procs):
            for p in procs:
                if p.pid not in usage:
                    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                    if pid:
                        usage[p.pid] = ru
                        statuses[p.pid] = os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline and not res.timed_out:
                res.timed_out = True
                for p in procs:
                    if p.pid not in usage:
                        os.killpg(p.pid, signal.SIGKILL)
            time.sleep(0.05)
    except BaseException:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        raise
    finally:
        for f in files:
            f.close()
        sampler.stop()
        if proxy:
            res.proxy_cpu_s = proxy.cpu_s() - proxy_cpu0
            proxy.stop()
        groups.remove()
    res.wall_s = time.time() - t0
    res.worker_cpu_wait4_s = sum(ru.ru_utime + ru.ru_stime for ru in usage.values())
    res.exits = [statuses[p.pid] for p in procs]
    res.nginx_cpu_s = nginx.cpu() - nginx_cpu0
    res.redis_by_command = redis.commands()
    measure(res, nginx.log_since(log_at), sampler)
    for i in range(len(procs)):
        if res.exits[i] != 0:
            tail = (workdir / f"{mode}-{n}-{i}.err").read_text(errors="replace")[-1500:]
            log(f"  {mode} worker {i} exited {res.exits[i]}; stderr tail:\n{tail}")
    return res


def measure(res: Result, lines: list[str], sampler: Sampler) -> None:
    """Fill pages, duplicates, the steady window and its per-page figures from nginx's log
    lines (``msec worker method status host uri``) and the samples."""
    gets: list[tuple[float, int, str, str]] = []
    for ln in lines:
        parts = ln.split(" ")
        if len(parts) != 6 or parts[2] != "GET" or parts[5].startswith("/__nginx_status"):
            continue
        worker = int(parts[1]) if parts[1].isdigit() else -1
        gets.append((float(parts[0]), worker, parts[3], parts[4] + parts[5]))
    gets.sort()
    res.gets = len(gets)
    res.pages = len({g[3] for g in gets if g[2] == "200"})
    res.distinct = len({g[3] for g in gets})
    res.per_worker_gets = [sum(1 for g in gets if g[1] == i) for i in range(res.workers)]
    first = sampler.samples[0]
    last = sampler.samples[-1]
    res.worker_cpu_s = sum(last[1]) - sum(first[1])
    res.redis_cpu_s = last[2] - first[2]
    res.redis_calls = last[3] - first[3]
    if not gets:
        res.note = "no GETs"
        return
    res.crawl_s = gets[-1][0] - gets[0][0]
    firsts = {}
    for t, w, _, _ in gets:
        firsts.setdefault(w, t)
    start = max(firsts.values())
    idle = [i for i in range(res.workers) if i not in firsts]
    if idle:
        res.note = f"workers {idle} made no request"
    end_i = max(0, int(WINDOW_END * len(gets)) - 1)
    end = gets[end_i][0]
    done_at_start = sum(1 for g in gets if g[0] <= start)
    res.joined_at = done_at_start / len(gets)
    if end <= start:
        res.note = (res.note + "; " if res.note else "") + "no steady window: whole crawl"
        start, end, done_at_start = gets[0][0], gets[-1][0], 0
        end_i = len(gets) - 1
    res.window_s = end - start
    res.window_gets = end_i + 1 - done_at_start
    w0, r0, c0 = sampler.at(start)
    w1, r1, c1 = sampler.at(end)
    res.worker_cpu_window_s = w1 - w0
    res.redis_cpu_window_s = r1 - r0
    res.redis_calls_window = c1 - c0


# ----------------------------------------------------------------- report

COLS = [
    ("mode", 6),
    ("N", 3),
    ("rtt", 5),
    ("lat ms", 6),
    ("+ms", 5),
    ("pages", 6),
    ("dup", 5),
    ("pages/s", 8),
    ("eff", 5),
    ("wCPU ms/p", 9),
    ("busy", 5),
    ("R CPU ms/p", 10),
    ("R cmds/p", 8),
    ("joined", 6),
    ("crawl s", 7),
    ("whole p/s", 9),
    ("whole wCPU", 10),
    ("whole R ms", 10),
    ("whole cmds", 10),
    ("note", 0),
]


def _row(vals: list[str]) -> str:
    return " ".join(
        v.ljust(w) if i == 0 else v.rjust(w)
        for i, (v, (_, w)) in enumerate(zip(vals, COLS, strict=True))
    )


def _fields(r: Result, one: float | None, expected: int | None) -> list[str]:
    eff = f"{r.rate / (r.workers * one):.2f}" if one else "-"
    notes = [r.note] if r.note else []
    if expected and r.pages != expected:
        notes.append(f"expected {expected}")
    if any(r.exits):
        notes.append(f"exits {r.exits}")
    if r.timed_out:
        notes.append("time-limited")
    notes.append("load " + "/".join(f"{x:.1f}" for x in r.load))
    lat = f"{r.latency_ms:.2f}" if r.mode == "redis" else "-"
    whole = r.pages or 1
    return [
        r.mode,
        str(r.workers),
        f"{r.rtt_ms:g}",
        lat,
        f"{r.added_ms:.2f}" if r.mode == "redis" else "-",
        str(r.pages),
        str(r.gets - r.distinct),
        f"{r.rate:.0f}",
        eff,
        f"{r.per_page_ms(r.worker_cpu_window_s):.3f}",
        f"{r.busy:.2f}",
        f"{r.per_page_ms(r.redis_cpu_window_s):.3f}",
        f"{r.redis_calls_window / r.window_gets if r.window_gets else 0:.1f}",
        f"{r.joined_at:.0%}",
        f"{r.crawl_s:.1f}",
        f"{r.crawl_rate:.0f}",
        f"{1000 * r.worker_cpu_s / whole:.3f}",
        f"{1000 * r.redis_cpu_s / whole:.3f}",
        f"{r.redis_calls / whole:.1f}",
        " " + ", ".join(notes),
    ]


def median_result(runs: list[Result]) -> Result:
    """The run with the median pages/s, with every per-page figure replaced by the median of
    the runs' (so each column is its own median)."""
    runs = sorted(runs, key=lambda r: r.rate)
    out = Result(**asdict(runs[len(runs) // 2]))
    gets = out.window_gets

    def per_get(name: str) -> float:
        return statistics.median(getattr(r, name) / max(1, r.window_gets) for r in runs)

    out.worker_cpu_window_s = per_get("worker_cpu_window_s") * gets
    out.redis_cpu_window_s = per_get("redis_cpu_window_s") * gets
    out.redis_calls_window = round(per_get("redis_calls_window") * gets)
    rate = statistics.median(r.rate for r in runs)
    out.window_s = gets / rate if rate else 0.0
    for name in ("joined_at", "latency_ms", "added_ms", "crawl_s"):
        setattr(out, name, statistics.median(getattr(r, name) for r in runs))
    out.note = (out.note + "; " if out.note else "") + f"median of {len(runs)}"
    return out


def table(
    results: list[Result], expected: int | None, one: dict[float, float] | None = None
) -> str:
    """One line a result; efficiency against ``one`` (rtt -> the one-worker pages/s; by
    default the one-worker result among ``results``)."""
    head = _row([c for c, _ in COLS])
    lines = [head, "-" * len(head)]
    if one is None:
        one = {r.rtt_ms: r.rate for r in results if r.mode == "redis" and r.workers == 1}
    for r in results:
        base = one.get(r.rtt_ms) if r.mode == "redis" else None
        lines.append(_row(_fields(r, base, expected)))
    return "\n".join(lines)


def bars(meds: list[Result]) -> list[str]:
    """Issue 23's bars, from the medians."""
    by = {(r.mode, r.workers, r.rtt_ms): r for r in meds}
    out = []

    def check(ok: bool, text: str) -> None:
        out.append(f"  [{'PASS' if ok else 'FAIL'}] {text}")

    one = by.get(("redis", 1, 0.0))
    for n, bar in ((8, 0.9), (16, 0.85)):
        r = by.get(("redis", n, 0.0))
        if r and one and one.rate:
            eff = r.rate / (n * one.rate)
            check(eff >= bar, f"efficiency at {n} workers {eff:.2f} (bar >= {bar})")
    r8 = by.get(("redis", 8, 0.0))
    if r8 and one and one.window_gets and r8.window_gets:
        x = r8.per_page_ms(r8.worker_cpu_window_s) / one.per_page_ms(one.worker_cpu_window_s)
        check(x <= 1.15, f"worker CPU a page at 8 = {x:.2f}x that at 1 (bar <= 1.15x)")
    mem = by.get(("memory", 1, 0.0))
    if mem and one and mem.worker_cpu_window_s and one.worker_cpu_window_s:
        a = one.window_gets / one.worker_cpu_window_s
        b = mem.window_gets / mem.worker_cpu_window_s
        check(
            a >= 0.85 * b,
            f"one Redis worker {a:.0f} pages per CPU s = {a / b:.2f}x the in-memory process's "
            f"{b:.0f} (bar >= 0.85x)",
        )
    for r in meds:
        if r.mode == "redis" and r.rtt_ms == 0 and r.window_gets:
            cmds = r.redis_calls_window / r.window_gets
            ms = r.per_page_ms(r.redis_cpu_window_s)
            check(
                cmds <= 2 and ms <= 0.03,
                f"N={r.workers}: {cmds:.1f} Redis commands and {ms:.3f} ms Redis CPU a page "
                "(bars <= 2, <= 0.03)",
            )
            if ms > 0:
                out.append(
                    f"         ceiling: {1000 / ms:,.0f} pages/s per Redis core at N={r.workers}"
                )
    for n in sorted({r.workers for r in meds if r.mode == "redis"}):
        base = by.get(("redis", n, 0.0))
        slow = by.get(("redis", n, 1.0))
        if base and slow and base.rate:
            x = slow.rate / base.rate
            check(x >= 0.9, f"N={n} with 1 ms to Redis: {x:.2f}x the pages/s without (bar >= 0.9)")
    return out


def tree_description(tree: Path) -> str:
    def git(*a: str) -> str:
        r = subprocess.run(["git", "-C", str(tree), *a], capture_output=True, text=True)
        return r.stdout.strip()

    dirty = " (dirty)" if git("status", "--porcelain", "--", "crawler") else ""
    return f"tree {tree} {git('log', '-1', '--format=%h %s')[:70]}{dirty}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", default=None, help="comma list (default 1,2,4,8,16)")
    ap.add_argument("--quota", type=float, default=None, help="cores a worker (default 0.05)")
    ap.add_argument("--origins", type=int, default=None, help="loopback origins (default 16)")
    ap.add_argument("--rtt", default=None, help="comma list of added Redis round trips, ms (0)")
    ap.add_argument("--modes", default="redis,memory", help="redis, memory or both")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each; medians are shown")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose crawler runs")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--per-host", type=int, default=16)
    ap.add_argument(
        "--host-split", type=int, default=None, help="workers' --host-split (default: not given)"
    )
    ap.add_argument("--cross-links", action="store_true", help='href="sql-... to the next origin')
    ap.add_argument("--time-limit", type=float, default=900, help="seconds a run")
    ap.add_argument("--no-priority", dest="priority", action="store_false")
    ap.add_argument("--quick", action="store_true", help="4 origins, N=1,2, quota 0.2, rtt 0,1")
    ap.add_argument("--json", help="write every run and the medians here")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="report earlier --json files")
    args = ap.parse_args(argv)
    if args.merge:
        runs, headers = load_runs(args.merge)
        report(runs, headers, [], args.json)
        return 0
    if args.quick:
        args.workers = args.workers or "1,2"
        args.quota = args.quota or 0.2
        args.origins = args.origins or 4
        args.rtt = args.rtt or "0,1"
    args.workers = args.workers or "1,2,4,8,16"
    args.quota = args.quota or 0.05
    args.origins = args.origins or 16
    args.rtt = args.rtt or "0"
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    rtts = [float(x) for x in args.rtt.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in ("redis", "memory"):
            ap.error(f"--modes: unknown mode {m!r} (redis, memory)")
    if not 0 < args.quota <= os.cpu_count():
        ap.error(f"--quota: {args.quota} cores is not in (0, {os.cpu_count()}]")
    if not 1 <= args.origins <= 254:
        ap.error("--origins: 1..254")
    args.tree = args.tree.resolve()
    if not (args.tree / "crawler" / "__init__.py").exists():
        ap.error(f"--tree: no crawler package in {args.tree}")
    if not list((args.tree / "crawler").rglob("*.so")):
        log(f"WARNING: no compiled twins (*.so) in {args.tree}/crawler: pure Python runs")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    CpuCgroups.check()
    if shutil.which("redis-server") is None:  # as benchmarks/redis_workers.py does
        redis_workers.crawlbench._apt_install("redis-server", "redis-server")
    ensure_manual()
    total = max(counts) * args.quota
    log(f"{max(counts)} workers x {args.quota} core = {total:.2f} cores of {os.cpu_count()}")
    nginx = MultiOriginNginx(DOC_DIR, args.origins, args.cross_links)
    redis = redis_workers.Redis()
    if args.priority:
        renice(nginx.proc.pid, NICE)
        for pid in nginx.worker_pids():
            renice(pid, NICE)
        assert redis.server.proc is not None
        renice(redis.server.proc.pid, NICE)
    workdir = Path(tempfile.mkdtemp(prefix="clusterbench-run-"))
    runs: list[Result] = []
    try:
        for rep in range(args.repeat):
            for rtt in rtts:
                for mode in modes:
                    if mode == "memory" and rtt != rtts[0]:
                        continue  # no Redis: the delay changes nothing
                    for n in counts if mode == "redis" else [1]:
                        log(f"run {rep + 1}/{args.repeat}: {mode} N={n} rtt={rtt:g} ms")
                        r = run_one(mode, n, rtt, args, nginx, redis, workdir)
                        log(
                            f"  {r.pages} pages, {r.rate:.0f} pages/s in the window, "
                            f"crawl {r.crawl_s:.1f} s, load {r.load[0]:.1f}"
                        )
                        runs.append(r)
    finally:
        errors = nginx.errors()
        nginx.stop()
        redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    header = (
        f"{tree_description(args.tree)}; redis-server {redis.version}; {os.cpu_count()} CPUs\n"
        f"cluster scaling: PostgreSQL 15 manual on {args.origins} origins"
        f"{' (cross-origin sql- links)' if args.cross_links else ''}, nginx 1 worker, "
        f"quota {args.quota} core a worker ({CpuCgroups.describe()}), -c {args.concurrency} "
        f"--per-host {args.per_host}, priority "
        f"{f'nice {NICE}, shares high' if args.priority else 'off'}"
    )
    report(runs, [header], errors, args.json)
    return 0


def load_runs(paths: list[str]) -> tuple[list[Result], list[str]]:
    """The runs and headers of earlier ``--json`` files (``--merge``)."""
    runs, headers = [], []
    for path in paths:
        data = json.loads(Path(path).read_text())
        headers.append(f"{path}: {data.get('header', data.get('tree', ''))}")
        for d in data["runs"]:
            d["load"] = tuple(d["load"])
            runs.append(Result(**d))
    return runs, headers


def report(runs: list[Result], headers: list[str], errors: list[str], out: str | None) -> None:
    """Print every run, the medians of each (mode, N, rtt), the bars; write ``out`` (JSON)."""
    groups: dict[tuple[str, int, float], list[Result]] = {}
    for r in runs:
        groups.setdefault((r.mode, r.workers, r.rtt_ms), []).append(r)
    meds = [median_result(v) for v in groups.values()]
    mem = [r for r in meds if r.mode == "memory"]
    expected = mem[0].pages if mem else None
    print("\n" + "\n".join(headers))
    many = any(len(v) > 1 for v in groups.values())
    if many:
        print("\nevery run (efficiency against the median one-worker run):")
        one = {r.rtt_ms: r.rate for r in meds if r.mode == "redis" and r.workers == 1}
        print(table(runs, expected, one))
    print(f"\n{'medians' if many else 'results'}:")
    print(table(meds, expected))
    print(
        "pages/s, eff, wCPU, busy, R CPU, R cmds: in the steady window (every worker has made a "
        "request .. 95% of the GETs); joined: share of GETs done before it;\nwhole: first to "
        "last GET (pages/s) and all CPU/commands of the run / pages; lat: median PING round "
        "trip through the workers' path, +ms: the proxy's\nadded round trip (measured)"
    )
    print("\nissue 23's bars (medians):")
    print("\n".join(bars(meds)) or "  (need redis N=1 and more)")
    for r in meds:
        if r.mode == "redis":
            top = sorted(r.redis_by_command.items(), key=lambda kv: -kv[1])[:6]
            print(
                f"  N={r.workers} rtt={r.rtt_ms:g}: GETs a worker {r.per_worker_gets}; "
                f"nginx {r.nginx_cpu_s:.1f} CPU s, proxy {r.proxy_cpu_s:.1f} CPU s; "
                + ", ".join(f"{k} {v}" for k, v in top)
            )
    if errors:
        print(f"\nWARNING: nginx logged {len(errors)} errors:\n" + "\n".join(errors[:10]))
    if out:
        Path(out).write_text(
            json.dumps(
                {
                    "header": "\n".join(headers),
                    "expected_pages": expected,
                    "runs": [asdict(r) for r in runs],
                    "medians": [asdict(r) for r in meds],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    sys.exit(main())
