"""No browser process outlives the crawler: closed, interrupted (Ctrl-C) or SIGKILLed.

A child Python process (the crawler's stand-in) renders a page whose script the local
server never answers, so the browser is busy when the child is stopped. The test process is
the subreaper of its descendants (tests/render_common.py), so every Chromium process the
child started, orphaned or not, is still counted under it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.render_common import (
    Site,
    adopt_orphans,
    chromium_pids,
    needs_browser,
    wait_until_gone,
)

pytestmark = [*needs_browser, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parent.parent
PAGE = b"<!doctype html><a href=/x>x</a><script src=/never.js></script>"

CHILD = """
import asyncio, sys
from crawler.render import Renderer, RenderOptions

class Gate:
    async def allow(self, url, resource_type, page_url): return True
    def release(self, url): pass
    def headers_for(self, url): return {}

async def main():
    async with Renderer(RenderOptions(concurrency=2, timeout=60), Gate()) as renderer:
        await renderer.start()
        tasks = [asyncio.ensure_future(renderer.render(sys.argv[1], PAGE, {})) for _ in range(2)]
        print("rendering", flush=True)
        await asyncio.gather(*tasks)

PAGE = PAGE_BYTES
asyncio.run(main())
""".replace("PAGE_BYTES", repr(PAGE))


async def start_child(url: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        url,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,  # a terminal's Ctrl-C reaches its whole process group
        # and SIGINT as a terminal's foreground job has it, whatever this process inherited
        # (a non-interactive shell starts its background jobs with SIGINT ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 60)
    assert line == b"rendering\n"
    return child


@pytest.mark.parametrize("how", ["sigkill", "ctrl-c"])
async def test_no_browser_process_outlives_the_crawler(how: str) -> None:
    adopt_orphans()
    assert chromium_pids() == []
    site = await Site({"/": ("text/html", PAGE), "/never.js": ("text/javascript", b"")}).start()
    site.delays["/never.js"] = 600
    try:
        child = await start_child(site.url("/"))
        async with asyncio.timeout(30):
            while site.hits["/never.js"] < 2:  # both tabs are waiting on the server
                await asyncio.sleep(0.05)
        assert len(chromium_pids()) >= 3  # browser, zygotes, renderers
        if how == "sigkill":
            child.kill()
        else:
            os.killpg(child.pid, signal.SIGINT)
        code = await asyncio.wait_for(child.wait(), 30)
        # killed outright; or interrupted: asyncio.run re-raises KeyboardInterrupt on its way
        # out, after the renderer's close ran in the cancelled main task
        assert code == -signal.SIGKILL if how == "sigkill" else code in (1, -signal.SIGINT)
        assert await wait_until_gone(20) == []
    finally:
        await site.close()
