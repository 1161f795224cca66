"""A multi-origin site that counts the requests it serves at once (issue 11's cluster proof).

Served by its OWN PROCESS (it must outlive crawler workers killed with SIGKILL and see the
requests of every worker, on every origin)::

    python -m tests.countsite --pages 300 --origins 3 --seed 1 --latency 0.05 [--port 8090]

prints one JSON line, ``{"control": "http://127.0.0.1:C", "origins": ["http://127.0.0.1:P0",
"http://127.0.0.2:P1", ...]}``, then serves until SIGTERM/SIGINT. Origin k listens on
127.0.0.(k+1) (one address and port each: separate origins for the crawler's politeness; all on
127.0.0.0/8). The control port (never linked from the site) answers:

* ``GET /log``: every request so far as JSON, each ``[origin, path_qs, start, end, in_flight,
  peer_port, worker]``: the origin's index, wall-clock start and end (``end`` null while still
  being answered), how many requests were in progress to that origin when it started (itself
  included), the client's TCP port and its ``X-Worker`` header (or null);
* ``GET /count``: how many requests were logged;
* ``GET /stats``: ``{"requests": n, "max_in_flight": [per origin], "in_flight": [per origin]}``.

The link graph comes from ``(pages, origins, seed)`` alone, so a test builds the same
``CountSite`` and knows what a correct crawl fetches (:meth:`CountSite.expected`) without asking
the crawler. Page ``i`` is ``/p/{i}.html`` on origin ``i % origins``; it links to page ``i+1``
and to a few random pages (relative on its own origin, absolute on another one), page 0 also to
every origin's ``/``; some pages link to a 404 (``/missing/...``, fetched) and to ``/private/``
(robots.txt disallows it: never fetched). Every answer takes a deterministic latency
(``latency`` plus jitter, every ``slow_every``-th path ``slow_seconds``) so that requests overlap
and concurrency shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import time
from dataclasses import dataclass, field

from aiohttp import web

ROBOTS = "User-agent: *\nDisallow: /private/\n"

Key = tuple[int, str]  # (origin index, path_qs)


@dataclass
class CountSite:
    """The link graph of the site and the latency of each answer."""

    pages: int = 300
    origins: int = 3
    seed: int = 1
    latency: float = 0.05  # seconds every answer takes, plus up to ``jitter``
    jitter: float = 0.03
    slow_every: int = 15  # every k-th path (by a stable hash) answers in slow_seconds
    slow_seconds: float = 0.3
    # (origin, path) -> [(origin, path)] links, in document order
    links: dict[Key, list[Key]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        n, k = self.pages, self.origins
        for o in range(k):
            self.links[o, "/"] = [(o, f"/p/{o}.html")] if o < n else []
        for i in range(n):
            own: list[Key] = [((i + 1) % k, f"/p/{(i + 1) % n}.html")]
            for _ in range(rng.randrange(2, 5)):
                j = rng.randrange(n)
                own.append((j % k, f"/p/{j}.html"))
            if i == 0:
                own += [(o, "/") for o in range(k)]
            if i % 11 == 0:
                own.append((i % k, f"/missing/{i}"))
            if i % 13 == 0:
                own.append((i % k, f"/private/{i}.html"))
            self.links[i % k, f"/p/{i}.html"] = own

    def expected(self, seeds: tuple[int, ...] = (0,)) -> set[Key]:
        """The (origin, path) a correct crawl from the ``/`` of ``seeds`` GETs (robots.txt
        not included; the 404s are; ``/private/`` is not)."""
        todo = [(o, "/") for o in seeds]
        seen = set(todo)
        while todo:
            key = todo.pop()
            for target in self.links.get(key, []):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return {key for key in seen if not key[1].startswith("/private/")}

    def delay(self, key: Key) -> float:
        """Seconds before ``key`` is answered: the same in every process."""
        h = _stable(f"{key[0]}{key[1]}")
        if self.slow_every and h % self.slow_every == 0:
            return self.slow_seconds
        return self.latency + self.jitter * (h % 1000) / 1000

    def render(self, key: Key, origins: list[str]) -> str:
        hrefs = []
        for o, path in self.links[key]:
            if o != key[0]:
                hrefs.append(origins[o] + path)
            elif key[1].startswith("/p/") and path.startswith("/p/") and _stable(path) % 2:
                hrefs.append(path[3:])  # relative to /p/
            else:
                hrefs.append(path)
        items = "".join(f'<li><a href="{h}">link</a></li>' for h in hrefs)
        filler = "<p>" + "filler text " * 30 + "</p>"
        return (
            "<!doctype html><html><head><meta charset=utf-8><title>t</title></head>"
            f"<body><ul>{items}</ul>{filler}</body></html>"
        )


def _stable(text: str) -> int:
    """A hash that is the same in every process (``hash`` of a str is not)."""
    h = 0
    for ch in text.encode():
        h = (h * 31 + ch) & 0xFFFFFFFF
    return h


class Counter:
    """The request log and the per-origin in-flight counters, shared by every origin."""

    def __init__(self, origins: int) -> None:
        self.log: list[list[object]] = []
        self.in_flight = [0] * origins
        self.max_in_flight = [0] * origins

    def stats(self) -> dict[str, object]:
        return {
            "requests": len(self.log),
            "in_flight": list(self.in_flight),
            "max_in_flight": list(self.max_in_flight),
        }


def site_app(site: CountSite, index: int, origins: list[str], counter: Counter) -> web.Application:
    """The application of origin ``index``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        key: Key = (index, request.path_qs)
        counter.in_flight[index] += 1
        now = counter.in_flight[index]
        counter.max_in_flight[index] = max(counter.max_in_flight[index], now)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        entry: list[object] = [
            index,
            key[1],
            time.time(),
            None,
            now,
            peer[1] if peer else None,
            request.headers.get("X-Worker"),
        ]
        counter.log.append(entry)
        try:
            await asyncio.sleep(site.delay(key))
            if key[1] == "/robots.txt":
                return web.Response(text=ROBOTS)
            if key in site.links:
                return web.Response(text=site.render(key, origins), content_type="text/html")
            raise web.HTTPNotFound()
        finally:
            entry[3] = time.time()
            counter.in_flight[index] -= 1

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


def control_app(counter: Counter) -> web.Application:
    async def log(_: web.Request) -> web.Response:
        return web.Response(text=json.dumps(counter.log), content_type="application/json")

    async def count(_: web.Request) -> web.Response:
        return web.Response(text=str(len(counter.log)))

    async def stats(_: web.Request) -> web.Response:
        return web.Response(text=json.dumps(counter.stats()), content_type="application/json")

    app = web.Application()
    app.router.add_get("/log", log)
    app.router.add_get("/count", count)
    app.router.add_get("/stats", stats)
    return app


async def _listen(app: web.Application, host: str, port: int = 0) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, host, port)
    await tcp.start()
    server = tcp._server  # noqa: SLF001 - the bound port of port 0
    assert server is not None
    port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
    return runner, port


async def serve(site: CountSite, port: int = 0) -> None:
    """Bind every origin and the control port, print them, serve until a signal.

    ``port``: every origin on this port (each on its own address); 0: free ports."""
    counter = Counter(site.origins)
    origins: list[str] = []
    runners = []
    for k in range(site.origins):
        # the app needs every origin's address to render absolute links: fill the list in
        # place once all are bound (nothing is served before the JSON line is printed)
        app = site_app(site, k, origins, counter)
        runner, bound = await _listen(app, f"127.0.0.{k + 1}", port)
        runners.append(runner)
        origins.append(f"http://127.0.0.{k + 1}:{bound}")
    runner, cport = await _listen(control_app(counter), "127.0.0.1")
    runners.append(runner)
    print(json.dumps({"control": f"http://127.0.0.1:{cport}", "origins": origins}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for r in runners:
            await r.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the counting multi-origin test site")
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--origins", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--slow-seconds", type=float, default=0.3)
    ap.add_argument("--port", type=int, default=0, help="every origin's port (0: free ports)")
    args = ap.parse_args(argv)
    site = CountSite(
        pages=args.pages,
        origins=args.origins,
        seed=args.seed,
        latency=args.latency,
        slow_seconds=args.slow_seconds,
    )
    asyncio.run(serve(site, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
