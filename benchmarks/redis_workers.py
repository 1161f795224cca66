#!/usr/bin/env python3
"""Redis cluster benchmark (issue 11): pages/s with 1, 2 and 4 workers on one Redis, this
crawler (``crawler crawl --state redis://``) side by side with scrapy-redis, on the crawl
benchmark's nginx site.

    python benchmarks/redis_workers.py                  # 20,000 pages; 1, 2, 4 workers; all
    python benchmarks/redis_workers.py --quick          # the 2,000-page site
    python benchmarks/redis_workers.py --crawlers ours --workers 1,2
    python benchmarks/redis_workers.py --scrapy-time-limit 60   # scrapy-redis: 60 s a run

What it does, in one run:
1. builds (or reuses) the crawl benchmark's site (benchmarks/crawl/sitegen.py) and serves it
   with the same nginx setup (benchmarks/crawl.py's ``Nginx``: one worker pinned to core 0);
2. starts one redis-server on a free 127.0.0.1 port (``--appendonly yes --appendfsync
   everysec --save ""``, as a production crawl would run it);
3. for each crawler and each worker count N, on an emptied Redis (FLUSHALL, CONFIG RESETSTAT):
   - ours: ``python -m crawler crawl URL --state redis://... --ignore-robots -c 16
     --per-host 16*N --max-depth 1000 -o /dev/null --quiet`` for the first worker, the same
     without URL for the others (they join once the first has fetched a page). --per-host is
     cluster-wide in ours, per worker in Scrapy: 16*N keeps the same requests in flight;
   - scrapy-redis: N ``benchmarks/scrapy_redis_spider.py`` workers (CONCURRENT_REQUESTS 16
     each), the start URL pushed first; they stop by MAX_IDLE_TIME_BEFORE_CLOSE=2 or at
     ``--scrapy-time-limit`` (CLOSESPIDER_TIMEOUT);
   workers are not pinned (they share the machine's cores with nginx and Redis);
4. measures: pages = distinct URIs served 200 to a GET (nginx's log), GETs (duplicates =
   GETs - pages), "crawl s" = first worker start to the last request nginx served (its
   stub_status counter sampled every 20 ms), "wall s" = first start to the last worker's exit
   (start-up, joining and the idle grace included), workers' CPU seconds (os.wait4), Redis
   commands (INFO commandstats, the driver's own INFO/CONFIG/FLUSHALL left out) and Redis CPU
   seconds (INFO cpu used_cpu_sys + used_cpu_user), Redis memory (used_memory) at the end;
5. prints one table and the ratios ours / scrapy-redis at each N (see benchmarks/REDIS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis  # the driver's own client: INFO, FLUSHALL, LPUSH

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests.redisserver import RedisServer  # noqa: E402  (the tests' own launcher)


def _load_crawlbench() -> Any:
    """benchmarks/crawl.py (Nginx, describe_tree, tools) and its sitegen, by file path."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("crawlbench", HERE / "crawl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["crawlbench"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


crawlbench = _load_crawlbench()
sitegen = crawlbench.sitegen

CRAWLERS = ("ours-memory", "ours", "scrapy-redis")
DRIVER_COMMANDS = {"info", "config|resetstat", "config", "flushall", "lpush", "ping", "hello"}


def log(msg: str) -> None:
    print(f"[redisbench] {msg}", file=sys.stderr, flush=True)


class Redis:
    """One redis-server (tests.redisserver: AOF everysec, no RDB) in a temp dir, and a client
    for the driver."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="redisbench-"))
        self.server = RedisServer(self.dir)
        try:
            self.server.start()
        except RuntimeError as e:
            raise SystemExit(f"redis-server did not start ({e}); see {self.dir}") from None
        self.port = self.server.port
        self.url = self.server.url
        self.client = redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True)
        self.version = str(self.client.info("server")["redis_version"])

    def reset(self) -> None:
        self.client.flushall()
        self.client.config_resetstat()

    def cpu(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    def commands(self) -> dict[str, int]:
        """Calls per command since the last reset, without the driver's own."""
        stats = self.client.info("commandstats")
        out = {}
        for key, val in stats.items():
            name = key.removeprefix("cmdstat_")
            if name not in DRIVER_COMMANDS:
                out[name] = int(val["calls"])
        return out

    def memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Result:
    crawler: str
    workers: int
    pages: int = 0
    gets: int = 0
    crawl_s: float = 0.0  # first start to the last request served
    wall_s: float = 0.0  # first start to the last exit
    cpu_s: float = 0.0  # all workers' user+sys
    redis_cpu_s: float = 0.0
    redis_calls: int = 0
    redis_by_command: dict[str, int] = field(default_factory=dict)
    redis_memory: int = 0  # used_memory at the end, before the flush
    redis_memory_base: int = 0
    seen: int = 0  # URLs in the seen set / dupefilter at the end
    seen_set_bytes: int = 0  # MEMORY USAGE of the seen set's keys / the dupefilter
    nginx_cpu_s: float = 0.0
    exits: list[int] = field(default_factory=list)
    timed_out: bool = False
    load: float = 0.0
    child: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.pages / self.crawl_s if self.crawl_s else 0.0


def worker_commands(
    name: str, n: int, url: str, redis_url: str, conc: int, limit: float
) -> list[list[str]]:
    py = sys.executable
    base = [
        py,
        "-m",
        "crawler",
        "crawl",
        "--state",
        redis_url,
        "--ignore-robots",
        "--concurrency",
        str(conc),
        "--per-host",
        str(conc * n),
        "--max-depth",
        "1000",
        "--output",
        os.devnull,
        "--quiet",
    ]
    if name == "ours":
        return [base[:4] + [url] + base[4:]] + [base] * (n - 1)
    if name == "ours-memory":  # the baseline: one process, the state in memory, no Redis
        return [[py, "-m", "crawler", "crawl", url, *base[6:]]]
    if name == "scrapy-redis":
        host = url.split("//", 1)[1].split(":", 1)[0]
        cmd = [
            py,
            str(HERE / "scrapy_redis_spider.py"),
            "--redis",
            redis_url,
            "--host",
            host,
            "--concurrency",
            str(conc),
            "--idle-close",
            "2",
            "--time-limit",
            str(limit),
        ]
        return [cmd] * n
    raise SystemExit(f"unknown crawler {name!r}; choose from {CRAWLERS}")


def run(
    name: str,
    n: int,
    url: str,
    nginx: Any,
    redis: Redis,
    conc: int,
    limit: float,
    workdir: Path,
) -> Result:
    res = Result(name, n, load=os.getloadavg()[0])
    redis.reset()
    res.redis_memory_base = redis.memory()
    if name == "scrapy-redis":
        redis.client.lpush("bench:start_urls", json.dumps({"url": url}))
    cmds = worker_commands(name, n, url, redis.url, conc, limit)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    before = nginx.requests()
    log_at = nginx.log_size()
    nginx_cpu0 = nginx.cpu()
    redis_cpu0 = redis.cpu()
    procs: list[subprocess.Popen[bytes]] = []
    outs = []
    polls = 0

    def served() -> int:
        """Requests nginx has served to the crawlers (stub_status counts each of its own
        requests too: ours are taken off)."""
        nonlocal polls
        polls += 1
        return int(nginx.requests()) - before - polls

    last_count = 0
    t0 = time.perf_counter()
    last_change = t0
    usage: dict[int, Any] = {}
    statuses: dict[int, int] = {}
    deadline = t0 + limit + 30
    try:
        for i, cmd in enumerate(cmds):
            if i == 1 and name == "ours":  # the crawl exists once the first page is served
                while served() < 1 and time.perf_counter() < deadline:
                    if procs[0].poll() is not None:
                        break  # it ended (or failed) first: the others are started anyway
                    time.sleep(0.01)
            out = open(workdir / f"{name}-{n}-{i}.out", "wb")  # noqa: SIM115
            err = open(workdir / f"{name}-{n}-{i}.err", "wb")  # noqa: SIM115
            outs += [out, err]
            procs.append(
                subprocess.Popen(
                    cmd, stdout=out, stderr=err, cwd=workdir, env=env, start_new_session=True
                )
            )
            log(f"  started {' '.join(cmd)}")
        while len(usage) < len(procs):
            for p in procs:
                if p.pid in usage:
                    continue
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    usage[p.pid] = ru
                    statuses[p.pid] = os.waitstatus_to_exitcode(status)
            first = procs[0].pid
            if statuses.get(first, 0) != 0 and not res.timed_out and len(usage) < len(procs):
                log(f"  worker 0 exited {statuses[first]}: stopping the others")
                deadline = 0.0  # the crawl may never have started: joiners would wait for it
            now = time.perf_counter()
            count = served()
            if count != last_count:
                last_count, last_change = count, now
            if now > deadline:
                res.timed_out = True
                for p in procs:
                    if p.pid not in usage:
                        os.killpg(p.pid, signal.SIGKILL)
                deadline = now + 3600
            time.sleep(0.02)
    except BaseException:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        raise
    finally:
        for f in outs:
            f.close()
    res.wall_s = time.perf_counter() - t0
    res.crawl_s = last_change - t0
    res.redis_cpu_s = redis.cpu() - redis_cpu0
    res.nginx_cpu_s = nginx.cpu() - nginx_cpu0
    res.redis_by_command = redis.commands()
    res.redis_calls = sum(res.redis_by_command.values())
    res.redis_memory = redis.memory()
    res.seen = seen_urls(name, redis)
    res.seen_set_bytes = seen_set_bytes(name, redis)
    res.cpu_s = sum(ru.ru_utime + ru.ru_stime for ru in usage.values())
    res.exits = [statuses[p.pid] for p in procs]
    lines = [ln.split(" ", 2) for ln in nginx.log_since(log_at)]
    gets = [p for p in lines if len(p) == 3 and p[0] == "GET" and p[2] != "/__nginx_status"]
    res.gets = len(gets)
    res.pages = len({p[2] for p in gets if p[1] == "200"})
    for i in range(len(procs)):
        text = (workdir / f"{name}-{n}-{i}.out").read_text(errors="replace").strip()
        if text:
            try:
                res.child.append(json.loads(text.splitlines()[-1]))
            except ValueError:
                pass
        if res.exits[i] != 0:
            tail = (workdir / f"{name}-{n}-{i}.err").read_text(errors="replace")[-1500:]
            log(f"  {name} worker {i} exited {res.exits[i]}; stderr tail:\n{tail}")
    if any(c.get("finish_reason") == "closespider_timeout" for c in res.child):
        res.timed_out = True
    return res


def seen_urls(name: str, redis: Redis) -> int:
    """URLs the crawl's seen set (ours) or dupefilter (scrapy-redis) holds."""
    if name == "ours-memory":
        return 0
    if name == "scrapy-redis":
        return int(redis.client.scard("bench:dupefilter"))
    res = subprocess.run(
        [sys.executable, "-m", "crawler", "status", "--state", redis.url, "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if res.returncode != 0:
        log(f"crawler status exited {res.returncode}: {res.stderr.strip()}")
        return 0
    return int(json.loads(res.stdout).get("seen", 0))


def seen_set_bytes(name: str, redis: Redis) -> int:
    """Bytes of the structure that deduplicates: our seen-set buckets (``crawler:{default}:s:*``)
    or scrapy-redis' dupefilter SET, by MEMORY USAGE."""
    if name == "scrapy-redis":
        return int(redis.client.memory_usage("bench:dupefilter", samples=0) or 0)
    if name != "ours":
        return 0
    total = 0
    pipe = redis.client.pipeline(transaction=False)
    for key in redis.client.scan_iter(match="crawler:{default}:s:*", count=1000):
        pipe.memory_usage(key, samples=0)
    for n in pipe.execute():
        total += int(n or 0)
    return total


def table(results: list[Result], site_pages: int) -> str:
    cols = [
        ("crawler", 13),
        ("N", 2),
        ("pages", 6),
        ("dup", 5),
        ("crawl s", 8),
        ("wall s", 7),
        ("pages/s", 8),
        ("x 1 worker", 10),
        ("CPU s", 7),
        ("pages/CPU s", 11),
        ("Redis CPU s", 11),
        ("Redis cmds", 10),
        ("cmds/page", 9),
        ("Redis B/URL", 11),
        ("seen B/URL", 10),
        ("nginx CPU s", 11),
        ("note", 0),
    ]

    def row(vals: list[str]) -> str:
        return " ".join(
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, (_, w)) in enumerate(zip(vals, cols, strict=True))
        )

    head = row([c for c, _ in cols])
    lines = [head, "-" * len(head)]
    one = {r.crawler: r.rate for r in results if r.workers == 1}
    for r in results:
        notes = []
        if r.timed_out:
            notes.append("time-limited")
        elif r.pages != site_pages:
            notes.append(f"expected {site_pages}")
        if any(r.exits):
            notes.append(f"exits {r.exits}")
        notes.append(f"load {r.load:.2f}")
        mem = (r.redis_memory - r.redis_memory_base) / r.seen if r.seen else 0
        x1 = f"{r.rate / one[r.crawler]:.2f}" if one.get(r.crawler) else "-"
        lines.append(
            row(
                [
                    r.crawler,
                    str(r.workers),
                    str(r.pages),
                    str(r.gets - r.pages),
                    f"{r.crawl_s:.2f}",
                    f"{r.wall_s:.2f}",
                    f"{r.rate:.0f}",
                    x1,
                    f"{r.cpu_s:.2f}",
                    f"{r.pages / r.cpu_s if r.cpu_s else 0:.0f}",
                    f"{r.redis_cpu_s:.2f}",
                    str(r.redis_calls),
                    f"{r.redis_calls / r.pages if r.pages else 0:.2f}",
                    f"{mem:.0f}",
                    f"{r.seen_set_bytes / r.seen if r.seen else 0:.0f}",
                    f"{r.nginx_cpu_s:.2f}",
                    " " + ", ".join(notes),
                ]
            )
        )
    by = {(r.crawler, r.workers): r for r in results}
    ratios = []
    for n in sorted({r.workers for r in results}):
        a, b = by.get(("ours", n)), by.get(("scrapy-redis", n))
        if a and b and b.rate and b.redis_calls and b.redis_cpu_s and a.pages and b.pages:
            ratios.append(
                f"N={n}: pages/s x{a.rate / b.rate:.1f}, pages per worker CPU s "
                f"x{(a.pages / a.cpu_s) / (b.pages / b.cpu_s):.1f}, Redis cmds/page "
                f"{(a.redis_calls / a.pages) / (b.redis_calls / b.pages):.3f}x, Redis CPU s/page "
                f"{(a.redis_cpu_s / a.pages) / (b.redis_cpu_s / b.pages):.3f}x"
            )
    mem, one_ours = by.get(("ours-memory", 1)), by.get(("ours", 1))
    if mem and one_ours and mem.rate and mem.cpu_s and one_ours.cpu_s:
        cpu = (one_ours.cpu_s / one_ours.pages) / (mem.cpu_s / mem.pages)
        ratios.append(
            f"one worker on Redis / in memory: pages/s x{one_ours.rate / mem.rate:.2f}, "
            f"worker CPU s per page x{cpu:.2f}"
        )
    if ratios:
        lines += ["", "ratios (ours / scrapy-redis at the same N; ours on Redis / in memory):"] + [
            "  " + s for s in ratios
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="the 2,000-page site")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", default="1,2,4", help="comma list of worker counts")
    ap.add_argument("--crawlers", default=",".join(CRAWLERS))
    ap.add_argument("--concurrency", type=int, default=16, help="each worker's")
    ap.add_argument("--time-limit", type=float, default=300, help="seconds per run (ours)")
    ap.add_argument("--scrapy-time-limit", type=float, default=None, help="default: --time-limit")
    ap.add_argument("--site-dir", default="/tmp/crawlbench")
    ap.add_argument("--nginx-core", type=int, default=0)
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    n_pages = 2000 if args.quick else args.pages
    names = [c.strip() for c in args.crawlers.split(",") if c.strip()]
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    nginx_bin = crawlbench._apt_install("nginx", "nginx")
    if shutil.which("redis-server") is None:
        crawlbench._apt_install("redis-server", "redis-server")
    site_root = Path(args.site_dir) / f"site-{n_pages}-s{args.seed}"
    info = sitegen.build_site(site_root, n_pages, args.seed)
    log(f"site: {n_pages} pages, {info.total_bytes / 1e6:.0f} MB at {site_root}")
    tree = crawlbench.describe_tree()
    nginx = crawlbench.Nginx(nginx_bin, site_root, args.nginx_core)
    redis = Redis()
    workdir = Path(tempfile.mkdtemp(prefix="redisbench-run-"))
    results: list[Result] = []
    try:
        for f in site_root.rglob("*.html"):
            f.read_bytes()
        url = nginx.base + "/"
        for name in names:
            for n in counts:
                if name == "ours-memory" and n != 1:
                    continue  # one process: the baseline without Redis
                limit = args.time_limit
                if name == "scrapy-redis" and args.scrapy_time_limit is not None:
                    limit = args.scrapy_time_limit
                log(f"running {name} with {n} workers")
                r = run(name, n, url, nginx, redis, args.concurrency, limit, workdir)
                log(f"  {name} x{n}: {r.pages} pages in {r.crawl_s:.1f} s (wall {r.wall_s:.1f} s)")
                results.append(r)
    finally:
        errors = nginx.errors()
        nginx.stop()
        redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{tree}; redis-server {redis.version}; {os.cpu_count()} CPUs")
    print(
        f"redis benchmark: {n_pages} pages ({info.total_bytes / n_pages / 1000:.1f} KB average), "
        f"nginx 1 worker on core {args.nginx_core}, redis-server AOF everysec, workers unpinned, "
        f"concurrency {args.concurrency} a worker"
    )
    print(table(results, n_pages))
    print(
        "pages: distinct URIs served 200 (nginx log); dup: GETs - pages; crawl s: first start to "
        "the last request served; wall s: to the last exit;\npages/s = pages / crawl s; CPU s: "
        "all workers; cmds/page: Redis commands (INFO commandstats) / pages; Redis B/URL: "
        "used_memory growth / URLs seen;\nseen B/URL: MEMORY USAGE of the seen set's "
        "keys (ours: 65,536 buckets, nearly empty at this size; benchmarks/redis_memory.py "
        "measures 1M URLs) or of scrapy-redis' dupefilter / URLs seen"
    )
    for r in results:
        top = sorted(r.redis_by_command.items(), key=lambda kv: -kv[1])[:8]
        print(f"  {r.crawler} x{r.workers} commands: " + ", ".join(f"{k} {v}" for k, v in top))
    if errors:
        print(f"\nWARNING: nginx logged {len(errors)} errors:\n" + "\n".join(errors[:10]))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"pages": n_pages, "results": [asdict(r) for r in results]}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
