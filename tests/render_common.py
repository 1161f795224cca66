"""Shared pieces of the renderer's tests: a recording gate, a site server, process counting."""

from __future__ import annotations

import asyncio
import ctypes
import importlib.util
import os
import shutil
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

HAVE_CHROMIUM = bool(os.environ.get("CRAWLER_CHROMIUM")) or bool(
    Path("/usr/bin/chromium").exists() or shutil.which("chromium")
)
# found, not imported: the render extra is not the test extra (tests/test_cli.py checks that
# every module the tests import is installed by the test extra)
HAVE_PLAYWRIGHT = importlib.util.find_spec("playwright") is not None

needs_browser = [
    pytest.mark.browser,
    pytest.mark.skipif(not HAVE_CHROMIUM, reason="needs chromium (apt-get install chromium)"),
    pytest.mark.skipif(not HAVE_PLAYWRIGHT, reason="needs playwright (pip install '.[render]')"),
]


class RecordingGate:
    """A gate that lets 127.0.0.0/8 through (but not ``deny``), one request at a time per host.

    It records every question and checks that each allowed request is released exactly once.
    """

    def __init__(self, deny: tuple[str, ...] = (), per_host: int = 1, delay: float = 0) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.allowed: Counter[str] = Counter()
        self.released: Counter[str] = Counter()
        self.deny = deny
        self.per_host = per_host
        self.in_flight: Counter[str] = Counter()
        self.most_in_flight = 0
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.headers: dict[str, dict[str, str]] = {}
        self.delay = delay  # seconds each allowed request waits after taking its slot

    async def allow(self, url: str, resource_type: str, page_url: str) -> bool:
        self.asked.append((url, resource_type, page_url))
        host = urlsplit(url).hostname or ""
        if not host.startswith("127.") or any(d in url for d in self.deny):
            return False
        slot = self._slots.setdefault(host, asyncio.Semaphore(self.per_host))
        await slot.acquire()
        await asyncio.sleep(self.delay)
        self.allowed[url] += 1
        self.in_flight[host] += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight[host])
        return True

    def release(self, url: str) -> None:
        host = urlsplit(url).hostname or ""
        self.released[url] += 1
        assert self.released[url] <= self.allowed[url], f"released twice: {url}"
        self.in_flight[host] -= 1
        self._slots[host].release()

    def headers_for(self, url: str) -> dict[str, str]:
        return self.headers.get(urlsplit(url).netloc, {})

    def balanced(self) -> bool:
        return self.allowed == self.released


class Site:
    """An aiohttp site on one loopback address that counts and keeps every request."""

    def __init__(self, pages: dict[str, tuple[str, bytes]], host: str = "127.0.0.1") -> None:
        self.pages = pages
        self.host = host
        self.hits: Counter[str] = Counter()
        self.full_hits: Counter[str] = Counter()  # by path and query
        self.request_headers: dict[str, dict[str, str]] = {}
        self.server: TestServer | None = None
        self.delays: dict[str, float] = {}
        self.port: int | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path_qs
        self.hits[request.path] += 1
        self.full_hits[path] += 1
        self.request_headers[request.path] = dict(request.headers)
        if request.path in self.delays:
            await asyncio.sleep(self.delays[request.path])
        found = self.pages.get(path) or self.pages.get(request.path)
        if found is None:
            return web.Response(status=404, text="no")
        ctype, body = found
        return web.Response(
            body=body, content_type=ctype, headers={"Access-Control-Allow-Origin": "*"}
        )

    async def start(self) -> Site:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.server = TestServer(app, host=self.host, port=0)
        await self.server.start_server()
        self.port = self.server.port
        return self

    def url(self, path: str) -> str:
        assert self.port is not None
        return f"http://{self.host}:{self.port}{path}"

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()


_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (Linux).

    Playwright starts Chromium in a process group of its own, and Chromium rewrites its
    helpers' command lines and environment; but as the subreaper of everything it starts,
    the test process stays an ancestor of every browser process, even of those whose parent
    (the driver, the browser, a killed crawler) died: counting the descendants is exact.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, executable) of every process we may read."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            try:
                exe = os.readlink(entry / "exe")
            except OSError:
                exe = ""
        except OSError:
            continue
        out[int(entry.name)] = (int(fields[1]), fields[0], exe)
    return out


def chromium_pids(root: int | None = None) -> list[int]:
    """Live Chromium processes (browser, zygotes, renderers, helpers) under ``root``.

    Zombies of them that were left to us (`adopt_orphans`) are reaped on the way.
    """
    root = os.getpid() if root is None else root
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        _, state, exe = procs[pid]
        if "/chromium/" not in exe and not exe.endswith("/chromium"):
            if state == "Z" and procs[pid][0] == os.getpid():
                _reap(pid)
            continue
        if state == "Z":
            if procs[pid][0] == os.getpid():
                _reap(pid)
            continue
        found.append(pid)
    return found


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def browser_main_pids() -> list[int]:
    """Of those, the browser processes themselves (not zygotes, renderers, helpers)."""
    out = []
    for pid in chromium_pids():
        cmd = _cmdline(pid)
        if cmd.split(b"\0")[0].endswith(b"/chromium") and b"--type=" not in cmd:
            out.append(pid)
    return out


def renderer_pids() -> list[int]:
    return [pid for pid in chromium_pids() if b"--type=renderer" in _cmdline(pid)]


async def wait_until_gone(seconds: float = 15.0, root: int | None = None) -> list[int]:
    """The Chromium processes still alive after waiting up to ``seconds`` for them to go."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        left = chromium_pids(root)
        if not left or asyncio.get_running_loop().time() > deadline:
            return left
        await asyncio.sleep(0.1)
