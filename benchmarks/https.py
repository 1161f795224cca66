#!/usr/bin/env python3
"""https beside http: this crawler over TLS and over plain http, and wget over TLS, on real
documentation sites served by one nginx (issue 25, item 1).

    python benchmarks/https.py                    # both sites, 3 runs each, medians
    python benchmarks/https.py --site postgres --reps 5
    python benchmarks/https.py --site rust --wget-reps 1

What it does:
1. makes a test CA and an ECDSA P-256 server certificate for 127.0.0.1 with openssl (under
   /tmp/httpsbench), and starts nginx (one worker) with two servers on the same site: plain
   http and https (TLS 1.3 only, keep-alive, session tickets and a session cache). Every
   request is logged with ``$connection $connection_requests $ssl_session_reused``, so the
   TLS connections (= handshakes: nginx makes one per connection), the requests each carried
   and the resumed handshakes of each run are counted by the server.
2. the sites: the PostgreSQL 15 manual (Debian's postgresql-doc-15, /usr/share/doc/...) and
   the Rust standard library's rustdoc (rustup's rust-docs of the stable toolchain, seed
   /std/index.html). Each is crawled whole by ``crawler crawl SEED --max-depth 0 -c 16
   --per-host 16 -f jsonl`` over http and over https (``--ca-cert``), and by ``wget
   --recursive --spider --ca-certificate`` over https, in turn, ``--reps`` times; wall clock
   and CPU (user+sys, os.wait4 of the child) each; medians are printed.
3. the one-page crawl (start-up): ``crawler crawl SEED --max-pages 1``, http and https, median
   of ``--one-reps`` runs each (robots.txt is fetched too: two requests, one connection);
   https both with ``--ca-cert`` (the test CA alone: curl's rule, the system store is not
   loaded) and with the system's whole store (``SSL_CERT_FILE`` = the system bundle plus the
   test CA), which is what a crawl of a real https site loads.
4. the bars: https CPU a page <= 1.15x http on both sites; a one-page https crawl <= 120 ms;
   TLS handshakes == connections, connections <= the crawl's concurrency + 1 (keep-alive).

See benchmarks/HTTPS.md for figures.
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
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = Path("/tmp/httpsbench")
RUST = Path.home() / ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
SITES = {
    "postgres": (Path("/usr/share/doc/postgresql-doc-15/html"), "/index.html"),
    "rust": (RUST, "/std/index.html"),
}
CONCURRENCY = 16

NGINX_CONF = """
daemon off;
{user}
master_process on;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format conns '$server_port $connection $connection_requests $ssl_session_reused'
                     ' $request_method $status $request_uri';
    access_log {work}/access.log conns;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    server_tokens off;
    types {{ text/html html; text/css css; application/javascript js; }}
    default_type application/octet-stream;
    client_body_temp_path {work}/tmp;
    proxy_temp_path {work}/tmp;
    fastcgi_temp_path {work}/tmp;
    uwsgi_temp_path {work}/tmp;
    scgi_temp_path {work}/tmp;
    ssl_certificate {work}/server.pem;
    ssl_certificate_key {work}/server.key;
    ssl_protocols TLSv1.3;
    ssl_session_cache shared:TLS:1m;
    ssl_session_tickets on;
    server {{
        listen 127.0.0.1:{http_port};
        root {root};
    }}
    server {{
        listen 127.0.0.1:{https_port} ssl;
        root {root};
    }}
}}
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=WORK)


def make_certificates() -> Path:
    """A test CA and an ECDSA P-256 certificate for 127.0.0.1 it signed; the CA's file."""
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "tmp").mkdir(exist_ok=True)
    if (WORK / "server.pem").exists():
        return WORK / "ca.pem"
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key")
    openssl("req", "-x509", "-new", "-key", "ca.key", "-days", "30", "-subj",
            "/CN=httpsbench test CA", "-out", "ca.pem")  # fmt: skip
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "server.key")
    openssl("req", "-new", "-key", "server.key", "-subj", "/CN=127.0.0.1", "-out", "server.csr")
    (WORK / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "30", "-extfile", "san.ext",
            "-out", "server.pem")  # fmt: skip
    return WORK / "ca.pem"


def system_bundle(ca: Path) -> Path:
    """The system's CA bundle with the test CA added (given as SSL_CERT_FILE: the crawl then
    loads the whole store, as it does for a real https site)."""
    bundle = WORK / "system-and-test-ca.pem"
    if not bundle.exists():
        system = Path("/etc/ssl/certs/ca-certificates.crt")
        bundle.write_bytes(system.read_bytes() + ca.read_bytes())
    return bundle


class Nginx:
    def __init__(self, root: Path) -> None:
        self.http_port, self.https_port = free_port(), free_port()
        conf = WORK / "nginx.conf"
        conf.write_text(
            NGINX_CONF.format(
                work=WORK,
                root=root,
                http_port=self.http_port,
                https_port=self.https_port,
                # rustup's docs are under /root (mode 0700): the worker reads as root there
                user="user root;" if os.geteuid() == 0 else "",
            )
        )
        self.log = WORK / "access.log"
        self.log.write_text("")
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([binary, "-c", str(conf)], stderr=subprocess.PIPE)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.https_port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)

    def mark(self) -> int:
        return self.log.stat().st_size

    def since(self, offset: int) -> list[list[str]]:
        time.sleep(0.2)  # (the log is not buffered: written as each request ends)
        with self.log.open() as fh:
            fh.seek(offset)
            return [line.split() for line in fh if line.strip()]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@dataclass
class Run:
    wall: float
    cpu: float
    pages: int  # GET 200 responses the server sent for this run
    connections: int  # distinct nginx connections (TLS: one handshake each)
    resumed: int  # of those, TLS handshakes that resumed a session
    requests: int


def child_env() -> dict[str, str]:
    """Where PYTHONDONTWRITEBYTECODE is set (it is on the benchmark machine) every run would
    compile the crawler from source, as no installed copy does: the runs get a byte-code cache
    (PYTHONPYCACHEPREFIX), filled once here, as benchmarks/crawl.py does."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        env["PYTHONPYCACHEPREFIX"] = str(WORK / "pycache")
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "crawler")],
                       env=env, check=False, stdout=subprocess.DEVNULL)  # fmt: skip
    return env


ENV: dict[str, str] = {}


def measure(cmd: list[str], nginx: Nginx, port: int, **env: str) -> Run:
    offset = nginx.mark()
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env={**ENV, **env}
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1, 8):  # (wget: 8 on any 404; ours: 1 when a page failed)
        log(f"{cmd[0]} exited {code}: {err[-1500:]}")
    lines = [f for f in nginx.since(offset) if f[0] == str(port)]
    firsts = {f[1]: f[3] for f in lines if f[2] == "1"}
    return Run(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        pages=len({f[6] for f in lines if f[4] == "GET" and f[5] == "200"}),
        connections=len({f[1] for f in lines}),
        resumed=sum(1 for reused in firsts.values() if reused == "r"),
        requests=len(lines),
    )


def ours(url: str, out: Path, ca: Path | None, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "crawler", "crawl", url, "--max-depth", "0", "-c",
           str(CONCURRENCY), "--per-host", str(CONCURRENCY), "-f", "jsonl", "-o", str(out),
           "-q", *extra]  # fmt: skip
    return [*cmd, "--ca-cert", str(ca)] if ca is not None else cmd


def wget(url: str, ca: Path) -> list[str]:
    return ["wget", "--recursive", "--spider", "--level=inf", "--no-verbose", "-e", "robots=off",
            "--ca-certificate", str(ca), "--directory-prefix", str(WORK / "wget"),
            "--output-file", str(WORK / "wget.log"), url]  # fmt: skip


@dataclass
class Result:
    runs: dict[str, list[Run]] = field(default_factory=dict)

    def add(self, name: str, run: Run) -> None:
        self.runs.setdefault(name, []).append(run)
        log(
            f"  {name}: {run.wall:.3f} s wall, {run.cpu:.3f} CPU s, {run.pages} pages,"
            f" {run.connections} connections ({run.resumed} resumed), {run.requests} requests"
        )

    def median(self, name: str, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs[name])

    def per_page_us(self, name: str) -> float:
        return statistics.median(r.cpu / max(1, r.pages) * 1e6 for r in self.runs[name])


def bench_site(site: str, ca: Path, reps: int, wget_reps: int, one_reps: int) -> Result:
    root, seed = SITES[site]
    if not root.is_dir():
        raise SystemExit(f"{root} is missing (apt-get install postgresql-doc-15 / rustup)")
    nginx = Nginx(root)
    http_url = f"http://127.0.0.1:{nginx.http_port}{seed}"
    https_url = f"https://127.0.0.1:{nginx.https_port}{seed}"
    out = WORK / "out.jsonl"
    res = Result()
    try:
        log(f"{site}: {root}, seed {seed}")
        for i in range(reps):
            res.add("ours http", measure(ours(http_url, out, None), nginx, nginx.http_port))
            res.add("ours https", measure(ours(https_url, out, ca), nginx, nginx.https_port))
            if i < wget_reps:
                res.add("wget https", measure(wget(https_url, ca), nginx, nginx.https_port))
        for _ in range(one_reps):
            one = ("--max-pages", "1")
            res.add(
                "one page http", measure(ours(http_url, out, None, *one), nginx, nginx.http_port)
            )
            res.add(
                "one page https", measure(ours(https_url, out, ca, *one), nginx, nginx.https_port)
            )
            # the system's whole CA store loaded (140 CAs, and the test CA), not --ca-cert's one
            res.add(
                "one page https, system store",
                measure(
                    ours(https_url, out, None, *one),
                    nginx,
                    nginx.https_port,
                    SSL_CERT_FILE=str(system_bundle(ca)),
                ),
            )
    finally:
        nginx.stop()
    return res


def report(site: str, res: Result) -> dict[str, object]:
    print(f"\n## {site}\n")
    print(
        "| run | wall s | CPU s | pages | CPU µs a page | connections (TLS handshakes)"
        " | resumed | requests |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in res.runs:
        print(
            f"| {name} | {res.median(name, 'wall'):.3f} | {res.median(name, 'cpu'):.3f}"
            f" | {res.median(name, 'pages'):.0f} | {res.per_page_us(name):.0f}"
            f" | {res.median(name, 'connections'):.0f} | {res.median(name, 'resumed'):.0f}"
            f" | {res.median(name, 'requests'):.0f} |"
        )
    cpu_ratio = res.per_page_us("ours https") / res.per_page_us("ours http")
    # the same without the start-up (a one-page crawl's CPU, each scheme its own)
    marginal = {
        scheme: (res.median(f"ours {scheme}", "cpu") - res.median(f"one page {scheme}", "cpu"))
        / max(1, res.median(f"ours {scheme}", "pages"))
        * 1e6
        for scheme in ("http", "https")
    }
    print(
        f"\nCPU a page beyond start-up: http {marginal['http']:.0f} µs, https"
        f" {marginal['https']:.0f} µs ({marginal['https'] / max(1e-9, marginal['http']):.3f}x)"
    )
    one = res.median("one page https", "wall")
    conns = [r.connections for r in res.runs["ours https"]]
    bars = {
        "https CPU a page / http (<= 1.15)": (round(cpu_ratio, 3), cpu_ratio <= 1.15),
        "the same beyond start-up": (
            round(marginal["https"] / max(1e-9, marginal["http"]), 3),
            marginal["https"] <= 1.15 * marginal["http"],
        ),
        "one-page https crawl wall s (<= 0.120)": (round(one, 3), one <= 0.120),
        "https connections (= handshakes) <= concurrency + 1": (
            max(conns),
            max(conns) <= CONCURRENCY + 1,
        ),
    }
    if "wget https" in res.runs:
        bars["wall, wget https / ours https"] = (
            round(res.median("wget https", "wall") / res.median("ours https", "wall"), 2),
            True,
        )
    print()
    for what, (value, ok) in bars.items():
        print(f"- {what}: {value} {'met' if ok else 'NOT met'}")
    return {k: v[0] for k, v in bars.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", choices=[*SITES, "all"], default="all")
    ap.add_argument("--reps", type=int, default=3, help="runs of each whole-site crawl")
    ap.add_argument("--wget-reps", type=int, default=1, help="of them, how many also run wget")
    ap.add_argument("--one-reps", type=int, default=9, help="runs of each one-page crawl")
    args = ap.parse_args()
    ca = make_certificates()
    ENV.update(child_env())
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min)")
    summary = {}
    for site in SITES if args.site == "all" else [args.site]:
        summary[site] = report(site, bench_site(site, ca, args.reps, args.wget_reps, args.one_reps))
    print(f"\nload after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min)")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
