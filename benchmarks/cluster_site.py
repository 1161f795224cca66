"""The multi-origin site of benchmarks/cluster_scaling.py: a real documentation site (the
PostgreSQL 15 manual, Debian ``postgresql-doc-15``: 1,169 HTML pages, 13.8 KB and ~22 links a
page on average) served by one nginx on K loopback addresses (127.0.0.1 .. 127.0.0.K, one
port), so a crawl sees K hosts: K politeness keys, K owners in a cluster that splits hosts
among its workers.

nginx as benchmarks/crawl.py runs it (its ``Nginx``: one worker, keep-alive, sendfile, a
buffered access log, stub_status), with a server block an origin and a log line a request of
``$msec $http_x_worker $request_method $status $host $request_uri`` (each worker sends its
index in an ``X-Worker`` header: the log says who fetched what, and when). With
``cross_links``, origin k's pages have every ``href="sql-`` link rewritten by ``sub_filter``
to origin k+1 (mod K): about 3 links a page (3,640 in the manual) point at another host.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOC_PACKAGE = "postgresql-doc-15"
DOC_DIR = Path("/usr/share/doc/postgresql-doc-15/html")


def _crawlbench() -> Any:
    mod = sys.modules.get("crawlbench")
    if mod is None:
        import redis_workers  # noqa: PLC0415  (loads benchmarks/crawl.py as "crawlbench")

        mod = redis_workers.crawlbench
    return mod


def ensure_manual() -> Path:
    """The manual's directory, installed with apt-get (as benchmarks/crawl.py installs nginx)
    when missing."""
    if not (DOC_DIR / "index.html").exists():
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q", DOC_PACKAGE]
        print(f"[clusterbench] installing {DOC_PACKAGE}: {' '.join(cmd)}", file=sys.stderr)
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
            subprocess.run(cmd, env=env, check=True)
    if not (DOC_DIR / "index.html").exists():
        raise SystemExit(f"{DOC_PACKAGE} installed but {DOC_DIR}/index.html is missing")
    return DOC_DIR


def _conf(tmp: Path, port: int, root: Path, origins: int, cross_links: bool) -> str:
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    servers = []
    for k in range(1, origins + 1):
        extra = ""
        if cross_links:
            nxt = k % origins + 1
            extra = (
                f"        sub_filter 'href=\"sql-' 'href=\"http://127.0.0.{nxt}:{port}/sql-';\n"
                "        sub_filter_once off;\n"
            )
        status = ""
        if k == 1:
            status = "        location = /__nginx_status { access_log off; stub_status; }\n"
        servers.append(
            "    server {\n"
            f"        listen 127.0.0.{k}:{port};\n"
            f"        root {root};\n"
            "        index index.html;\n"
            f"{extra}{status}"
            "    }\n"
        )
    return f"""daemon off;
{user}
master_process on;
worker_processes 1;
worker_rlimit_nofile 8192;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{
    worker_connections 4096;
    accept_mutex off;
}}
http {{
    log_format pages '$msec $http_x_worker $request_method $status $host $request_uri';
    access_log {tmp}/pages.log pages buffer=256k flush=1s;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    server_tokens off;
    charset utf-8;
    types {{
        text/html html;
        text/css css;
        image/svg+xml svg;
    }}
    default_type application/octet-stream;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
{"".join(servers)}}}
"""


def _free_port(origins: int) -> int:
    """A port free on every one of the origins' addresses."""
    import socket  # noqa: PLC0415

    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        try:
            for k in range(2, origins + 1):
                with socket.socket() as s:
                    s.bind((f"127.0.0.{k}", port))
            return port
        except OSError:
            continue
    raise SystemExit("no port free on all the origins' addresses")


class MultiOriginNginx(_crawlbench().Nginx):  # type: ignore[misc]
    """benchmarks/crawl.py's Nginx (requests(), cpu(), log_since(), errors(), stop()) with the
    configuration above."""

    def __init__(self, site: Path, origins: int, cross_links: bool = False) -> None:
        binary = _crawlbench()._apt_install("nginx", "nginx")
        self.tmp = Path(tempfile.mkdtemp(prefix="clusterbench-nginx-"))
        self.port = _free_port(origins)
        self.origins = origins
        conf = _conf(self.tmp, self.port, site, origins, cross_links)
        (self.tmp / "nginx.conf").write_text(conf)
        cmd = [binary, "-p", str(self.tmp), "-c", str(self.tmp / "nginx.conf")]
        self.proc = subprocess.Popen(
            [*cmd, "-e", str(self.tmp / "error.log")], start_new_session=True
        )
        self.base = f"http://127.0.0.1:{self.port}"
        self.seeds = [f"http://127.0.0.{k}:{self.port}/index.html" for k in range(1, origins + 1)]
        deadline = time.monotonic() + 10
        while True:
            try:
                self.requests()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = (self.tmp / "error.log").read_text(errors="replace")[-1000:]
                    shutil.rmtree(self.tmp, ignore_errors=True)
                    raise SystemExit(f"nginx did not start: {err}") from None
                time.sleep(0.05)
        for f in site.glob("*.html"):  # the page cache warm before the first run
            f.read_bytes()

    def worker_pids(self) -> list[int]:
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                if int(stat[1]) == self.proc.pid:
                    out.append(int(entry))
        return out
