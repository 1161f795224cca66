"""Finding Chromium and starting it under Playwright: the binary, the flags, the errors.

Playwright for Python is the client: maintained by the browser vendors' people, its wheel
carries its own driver (no ``playwright install``: it drives Debian's Chromium through
``executable_path``). Playwright gives the browser a fresh temporary profile and removes it
when the browser closes; its driver kills the browser when the driver's pipe to us closes, so
a crawler killed outright leaves no browser behind (tests/test_render_processes.py).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

from crawler.render.model import RenderUnavailable

if TYPE_CHECKING:
    from playwright.async_api import Browser, Playwright

CHROMIUM_ENV = "CRAWLER_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
PAGE_HEAP_MB = 512
# Without the background-networking flags Chromium calls home (updates, sync, metrics): the
# browser must send nothing but the page's own requests, each through the route handler.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--mute-audio",
    "--hide-scrollbars",
    # A document fulfilled from the crawl's bytes has no address space, so Chromium would
    # take it for a public page and refuse its requests to the site's own private or loopback
    # addresses (an intranet crawl): what the browser may fetch is the crawl's gate's call.
    "--disable-features=LocalNetworkAccessChecks",
    "--disable-breakpad",
    # A page's JavaScript heap is capped: a page allocating gigabytes takes its renderer down
    # (render_crash) at this size instead of the machine's memory.
    f"--js-flags=--max-old-space-size={PAGE_HEAP_MB}",
)
LAUNCH_TIMEOUT_MS = 60_000


def find_chromium(executable: str | None) -> str:
    """The Chromium binary to run: the option, ``$CRAWLER_CHROMIUM``, Debian's, PATH's."""
    candidates = [executable] if executable else []
    if not executable:
        env = os.environ.get(CHROMIUM_ENV)
        if env:
            candidates.append(env)
        candidates += [DEFAULT_CHROMIUM, shutil.which("chromium") or ""]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    where = executable or os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM
    raise RenderUnavailable(
        f"rendering needs Chromium: {where} is not an executable file (Debian: apt-get install "
        f"chromium; or set ${CHROMIUM_ENV} to the browser's path)"
    )


async def start_playwright() -> Playwright:
    """Playwright's driver, started (imported here: ``--render never`` never imports it)."""
    try:
        from playwright.async_api import async_playwright  # noqa: PLC0415  (only when rendering)
    except ImportError as exc:
        raise RenderUnavailable(
            "rendering needs Playwright for Python: pip install 'crawler[render]' "
            f"(import failed: {exc})"
        ) from exc
    return await async_playwright().start()


async def launch(playwright: Playwright, path: str) -> Browser:
    """A headless Chromium from ``path`` (`find_chromium`), with its own temporary profile."""
    kwargs: dict[str, Any] = {
        "executable_path": path,
        "headless": True,
        "args": list(CHROMIUM_FLAGS),
        "timeout": LAUNCH_TIMEOUT_MS,
        # The crawl handles Ctrl-C itself and closes the browser on its way out.
        "handle_sigint": False,
        "handle_sigterm": False,
        "handle_sighup": False,
        "chromium_sandbox": False,
    }
    try:
        return await playwright.chromium.launch(**kwargs)
    except Exception as exc:  # playwright.Error: the message says what Chromium printed
        raise RenderUnavailable(f"Chromium ({path}) did not start: {exc}") from exc
