"""One leased URL followed through the calls: which modules it passes, and how often it climbs back.

    python benchmarks/url_path.py [--warc] [--proxy] [--auth] [--packages]

What a newcomer does by hand (issue 22), measured: a real crawl of a small site on 127.0.0.1
(one page with a few links, served by aiohttp in this process), with ``sys.setprofile``
recording, for the page task of one leased URL only (from ``PageJob.run`` until it returns),
the module of the project whose code runs after each call and each return. Consecutive
repeats are merged into one *stay*; a stay in a module that the way has already left is a
*climb back* (``page -> urls -> page``: the second ``page`` is one; every call that returns
makes one, so this count says how much the way zigzags). Printed: the way, the number of
stays and of climbs back, the same at the level of packages (``--packages`` prints that way
too), and the calls between modules that the layer rule does not explain: *calls up*, from a
lower layer into a higher one (a callback from below, such as a fetcher calling its page
job's body consumer), and *calls back* inside one package, from a module to one it does not
import (directly or through others); each pair with its count (tests/test_layers.py's reading
of the imports and its layer order).

``--warc``, ``--proxy`` (a local forward proxy) and ``--auth`` turn on the exchange's
policies, so that the way shows where they are decided. The figures depend on the code's
shape only (not on the machine's speed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from crawler import CrawlConfig, Crawler  # noqa: E402
from crawler.core.page import PageJob  # noqa: E402

PAGE = "<!doctype html><title>t</title>" + "".join(f'<a href="/p{i}">p{i}</a>' for i in range(5))


def short(module: str) -> str:
    return module.removeprefix("crawler.")


def collapse(modules: list[str]) -> list[str]:
    way: list[str] = []
    for m in modules:
        if not way or way[-1] != m:
            way.append(m)
    return way


def climbs(way: list[str]) -> int:
    """Stays in a module the way had already left."""
    left: set[str] = set()
    count = 0
    for prev, cur in zip(way, way[1:], strict=False):
        left.add(prev)
        if cur in left:
            count += 1
    return count


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, port


def site_app(auth: bool) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        if auth and request.headers.get("Authorization") != "Basic dTpw":
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        return web.Response(text=PAGE, content_type="text/html")

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nDisallow: /private\n")

    app = web.Application()
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/{tail:.*}", page)
    return app


async def follow(args: argparse.Namespace) -> tuple[list[str], list[tuple[str, str]]]:
    """The modules the page task of the seed runs in, in order (one entry per call/return)."""
    runner, port = await serve(site_app(args.auth))
    runners = [runner]
    extra: dict[str, Any] = {}
    if args.proxy:
        sys.path.insert(0, str(ROOT / "tests"))
        from proxyserver import ForwardProxy  # noqa: PLC0415

        proxy_runner, proxy_port = await serve(ForwardProxy().app())
        runners.append(proxy_runner)
        extra["proxy"] = f"http://127.0.0.1:{proxy_port}"
    if args.auth:
        extra["auth"] = "u:p"
    tmp = tempfile.mkdtemp()
    if args.warc:
        extra["warc"] = os.path.join(tmp, "a.warc.gz")
    seed = f"http://127.0.0.1:{port}/"
    config = CrawlConfig(seeds=[seed], max_pages=1, retries=0, **extra)

    traced: set[asyncio.Task[Any]] = set()
    modules: list[str] = []
    calls: list[tuple[str, str]] = []
    run = PageJob.run

    async def run_traced(self: PageJob, lease: Any, tally: Any) -> Any:
        task = asyncio.current_task()
        if lease.url == seed and task is not None:
            traced.add(task)
            try:
                return await run(self, lease, tally)
            finally:
                traced.discard(task)
        return await run(self, lease, tally)

    def where(frame: FrameType | None) -> str | None:
        name = frame.f_globals.get("__name__", "") if frame is not None else ""
        return name if name.startswith("crawler.") else None

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event not in ("call", "return") or not traced:
            return
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return
        if task not in traced:
            return
        name = where(frame) if event == "call" else where(frame.f_back)
        if name is not None:
            modules.append(name)
            caller = where(frame.f_back)
            if event == "call" and caller is not None and caller != name:
                calls.append((caller, name))

    PageJob.run = run_traced  # type: ignore[method-assign]
    setter: Callable[..., Any] = sys.setprofile
    try:
        async with Crawler(config) as crawler:
            setter(profile)
            try:
                async for _ in crawler:
                    pass
            finally:
                setter(None)
    finally:
        PageJob.run = run  # type: ignore[method-assign]
        for r in runners:
            await r.cleanup()
    return modules, calls


def reachable() -> tuple[dict[str, set[str]], Any]:
    """Each module and every module it imports, directly or through others; the layer test."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_layers  # noqa: PLC0415  (the layer test's reading of the imports)

    out: dict[str, set[str]] = {}
    for start in test_layers.GRAPH:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for dep in test_layers.GRAPH.get(todo.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        out[start] = seen
    return out, test_layers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warc", action="store_true", help="archive the exchange (--warc)")
    ap.add_argument("--proxy", action="store_true", help="through a local forward proxy")
    ap.add_argument("--auth", action="store_true", help="with --auth (the site asks for it)")
    ap.add_argument("--packages", action="store_true", help="print the package-level way too")
    args = ap.parse_args()
    modules, calls = asyncio.run(follow(args))
    way = collapse([short(m) for m in modules])
    print("way:", " -> ".join(way))
    print(f"modules: {len(way)} stays, {climbs(way)} climbs back")
    pkgs = collapse([m.split(".")[0] for m in way])
    if args.packages:
        print("packages:", " -> ".join(pkgs))
    print(f"packages: {len(pkgs)} stays, {climbs(pkgs)} climbs back")
    below, layers = reachable()
    up: dict[tuple[str, str], int] = {}
    back: dict[tuple[str, str], int] = {}
    for caller, callee in calls:
        mine, theirs = layers.layer_of(caller), layers.layer_of(callee)
        if mine != theirs:
            if theirs != "root" and theirs not in layers.MAY_IMPORT.get(mine, set()):
                up[caller, callee] = up.get((caller, callee), 0) + 1
        elif callee not in below.get(caller, set()):
            back[caller, callee] = back.get((caller, callee), 0) + 1
    print(
        f"calls: {len(calls)} between modules; {sum(up.values())} up a layer,"
        f" {sum(back.values())} back inside a package"
    )
    for kind, pairs in (("up", up), ("back", back)):
        for (caller, callee), n in sorted(pairs.items(), key=lambda kv: -kv[1]):
            print(f"  {kind:4} {n:4d}  {short(caller)} -> {short(callee)}")


if __name__ == "__main__":
    main()
