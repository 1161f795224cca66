"""The renderer in a real headless Chromium (``pytest -m browser``).

Every page is served by a local aiohttp server (127.0.0.1; 127.0.0.2 stands for another
host) that counts what the browser asks of it. A `RecordingGate` stands for the crawl. Each
test ends by closing the renderer and counting the Chromium processes it started (tagged
through their environment): none may be left.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from crawler.extract import extract_links
from crawler.render import (
    RENDER_CRASH,
    RENDER_TIMEOUT,
    Renderer,
    RenderOptions,
    RenderUnavailable,
)
from tests.render_common import (
    RecordingGate,
    Site,
    adopt_orphans,
    browser_main_pids,
    chromium_pids,
    needs_browser,
    renderer_pids,
    wait_until_gone,
)

pytestmark = [*needs_browser, pytest.mark.timeout(180)]

HTML = "text/html"
JS = "application/javascript"

APP_PAGE = b"""<!doctype html><html><head><title>app</title>
<script src="/app.js"></script></head><body><div id="root"></div></body></html>"""
APP_JS = b"""
addEventListener("DOMContentLoaded", async () => {
  const root = document.getElementById("root");
  const data = await (await fetch("/api/links.json")).json();
  for (const href of data.links) {
    const a = document.createElement("a"); a.href = href; a.textContent = href; root.append(a);
  }
  const host = document.createElement("div"); root.append(host);
  host.attachShadow({mode: "open"}).innerHTML = '<a href="/in-shadow">s</a>';
  const made = document.createElement("section"); made.id = "made-by-js"; root.append(made);
  setTimeout(() => {
    const a = document.createElement("a"); a.href = "/after-timer"; root.append(a);
    history.pushState({}, "", "/route/two");
  }, 150);
});
"""


@pytest.fixture
async def tag() -> AsyncIterator[None]:
    """Counts the Chromium processes under the test: none before, none left when it ends."""
    adopt_orphans()
    assert chromium_pids() == [], "a browser process from before the test"
    yield
    assert await wait_until_gone() == [], "a browser process was left behind"


def links_of(html: bytes | None, base: str) -> set[str]:
    assert html is not None
    return {link.url for link in extract_links(html, base, "utf-8") if link.url}


async def render_once(
    site: Site, path: str, gate: RecordingGate, **options: Any
) -> tuple[Any, Renderer]:
    """The page rendered by a new renderer (closed); ``renderer.took``: the render's seconds."""
    renderer = Renderer(RenderOptions(**options), gate)
    try:
        await renderer.start()  # the launch is not the page's time
        body = site.pages[path][1]
        started = time.monotonic()
        result = await renderer.render(site.url(path), body, {"Content-Type": "text/html"})
        renderer.took = time.monotonic() - started  # type: ignore[attr-defined]
    finally:
        await renderer.close()
    return result, renderer


async def test_client_rendered_links_come_out_of_the_dom(tag: None) -> None:
    site = await Site(
        {
            "/": (HTML, APP_PAGE),
            "/app.js": (JS, APP_JS),
            "/api/links.json": ("application/json", b'{"links": ["/from-json", "b/c"]}'),
        }
    ).start()
    gate = RecordingGate()
    try:
        result, renderer = await render_once(site, "/", gate)
    finally:
        await site.close()
    assert result.error is None, result.detail
    assert result.final_url == site.url("/route/two")  # pushState moved the document's URL
    # links after fetch() of JSON, in a shadow root, after a timer
    # (a relative href resolves against the document's URL of the end, as the DOM's a.href)
    assert {site.url(p) for p in ("/from-json", "/route/b/c", "/in-shadow", "/after-timer")} <= (
        links_of(result.html, result.final_url)
    )
    assert "made-by-js" in result.ids and "root" in result.ids
    assert site.hits["/"] == 0  # the page itself came from the body given: no second GET
    assert site.hits["/app.js"] == 1 and site.hits["/api/links.json"] == 1
    assert {(u, t) for u, t, _ in gate.asked} == {
        (site.url("/app.js"), "script"),
        (site.url("/api/links.json"), "fetch"),
    }
    assert result.requests == 2 and gate.balanced()
    assert renderer.pages_rendered == 1 and renderer.restarts == 0


async def test_what_the_browser_may_fetch(tag: None) -> None:
    page = b"""<!doctype html><html><head>
<link rel="stylesheet" href="/style.css"><link rel="preload" href="/font.woff2" as="font">
<script src="/own.js"></script><script src="/robots-denied.js"></script>
<script src="OTHER/cdn.js"></script></head><body>
<img src="/img.png"><video src="/v.mp4" autoplay></video><iframe src="/frame.html"></iframe>
<div id="out"></div>
<script>
fetch("OTHER/api.json").catch(() => {});
fetch("/api.json").then(r => r.json()).then(d => {
  const a = document.createElement("a"); a.href = d.href; document.getElementById("out").append(a);
});
new Image().src = "/dyn.png";
</script></body></html>"""
    other = await Site(
        {"/cdn.js": (JS, b"window.cdn = 1;"), "/api.json": (JS, b"{}")}, host="127.0.0.2"
    ).start()
    own = await Site(
        {
            "/": (HTML, page.replace(b"OTHER", other.url("").encode())),
            "/own.js": (JS, b"window.own = 1;"),
            "/robots-denied.js": (JS, b"window.denied = 1;"),
            "/api.json": ("application/json", b'{"href": "/from-api"}'),
            "/style.css": ("text/css", b"body{background:url(/bg.png)}"),
            "/frame.html": (HTML, b"<a href=/in-frame>f</a>"),
        }
    ).start()
    gate = RecordingGate(deny=("robots-denied",))
    gate.headers = {own.url("")[7:]: {"Authorization": "Bearer own-site-only"}}
    try:
        result, _ = await render_once(own, "/", gate, user_agent="crawler-test/1.0")
    finally:
        await own.close()
        await other.close()
    assert result.error is None, result.detail
    assert own.url("/from-api") in links_of(result.html, result.final_url)
    # never asked for: stylesheet, font, images, media, the frame's document
    assert set(own.hits) == {"/own.js", "/api.json"}
    # another host: its script goes (through the gate), its fetch() does not
    assert set(other.hits) == {"/cdn.js"}
    asked = {u for u, _, _ in gate.asked}
    assert asked == {own.url(p) for p in ("/own.js", "/robots-denied.js", "/api.json")} | {
        other.url("/cdn.js")
    }
    # the crawl's headers where the crawl sends them, and its User-Agent everywhere
    assert own.request_headers["/own.js"]["Authorization"] == "Bearer own-site-only"
    assert "Authorization" not in other.request_headers["/cdn.js"]
    assert own.request_headers["/own.js"]["User-Agent"] == "crawler-test/1.0"
    assert other.request_headers["/cdn.js"]["User-Agent"] == "crawler-test/1.0"
    assert result.requests == 3 and result.blocked >= 6
    assert gate.balanced() and gate.most_in_flight == 1  # politeness held by the gate


async def test_hostile_page_dialogs_popups_and_navigation_away(tag: None) -> None:
    page = b"""<!doctype html><html><body><a href="/static">s</a><div id="out"></div><script>
alert("a"); confirm("b"); prompt("c");
window.addEventListener("beforeunload", e => { e.preventDefault(); e.returnValue = "stay"; });
const w = window.open("/popup.html"); window.open("OTHER/elsewhere");
setTimeout(() => {
  const a = document.createElement("a"); a.href = "/made"; document.getElementById("out").append(a);
  alert("again");
  location.href = "OTHER/away";
}, 50);
setTimeout(() => { location.reload(); }, 80);
</script></body></html>"""
    other = await Site({"/away": (HTML, b"<a href=/wrong>w</a>")}, host="127.0.0.2").start()
    site = await Site(
        {
            "/": (HTML, page.replace(b"OTHER", other.url("").encode())),
            "/popup.html": (HTML, b"<script>alert(1)</script>"),
        }
    ).start()
    gate = RecordingGate()
    try:
        result, renderer = await render_once(site, "/", gate, timeout=5.0)
    finally:
        await site.close()
        await other.close()
    elapsed = renderer.took
    assert result.error is None, result.detail
    assert result.final_url == site.url("/")  # the page stayed
    links = links_of(result.html, result.final_url)
    assert {site.url("/static"), site.url("/made")} <= links
    assert site.hits == {} and other.hits == {}  # no popup, no navigation left the page
    assert elapsed < 5.0  # dialogs did not hold the page to its budget


async def test_a_page_that_never_settles_ends_at_its_budget(tag: None) -> None:
    page = b"""<!doctype html><html><body><a href="/static">s</a><div id="out"></div><script>
let n = 0;
setInterval(() => {
  const a = document.createElement("a"); a.href = "/tick/" + (n++);
  document.getElementById("out").append(a);
}, 100);
</script></body></html>"""
    site = await Site({"/": (HTML, page)}).start()
    gate = RecordingGate()
    try:
        result, renderer = await render_once(site, "/", gate, timeout=1.5, idle=0.5)
    finally:
        await site.close()
    elapsed = renderer.took
    assert result.error == RENDER_TIMEOUT
    links = links_of(result.html, result.final_url)
    assert site.url("/static") in links and site.url("/tick/3") in links  # what was there
    assert 1.5 <= elapsed < 1.5 + 3.0  # the budget, the snapshot and the tab's close


async def test_nothing_is_sent_for_a_page_after_its_render(tag: None) -> None:
    # The page asks for more every 10 ms and the gate makes each request wait (politeness):
    # when the budget ends, a request is waiting for the gate. It must not be sent then, and
    # every slot the gate gave must come back.
    page = b"""<!doctype html><a href=/static>s</a><script>
let n = 0;
setInterval(() => { fetch("/api/tick.json?" + (n++)).catch(() => {}); }, 10);
</script>"""
    site = await Site({"/": (HTML, page), "/api/tick.json": ("application/json", b"{}")}).start()
    gate = RecordingGate(delay=0.3)
    renderer = Renderer(RenderOptions(timeout=1.0), gate)
    try:
        result = await renderer.render(site.url("/"), page, {})
        assert result.error == RENDER_TIMEOUT and result.requests >= 1
        await asyncio.sleep(1.0)  # what was waiting in the gate has had its answer by now
        assert gate.balanced(), gate.allowed - gate.released
        # the server saw the requests sent during the render (one may arrive just after it
        # ended), and no other (each tick's URL is its own; the network stack may resend one)
        assert len(site.full_hits) == result.requests
    finally:
        await renderer.close()
        await site.close()


async def test_a_page_that_spins_its_main_thread_still_gives_its_dom(tag: None) -> None:
    page = b"""<!doctype html><html><body><a href="/static">s</a><script>
setTimeout(() => {
  const a = document.createElement("a"); a.href = "/before-spin"; document.body.append(a);
  for (;;) {}
}, 10);
</script></body></html>"""
    site = await Site({"/": (HTML, page)}).start()
    try:
        result, renderer = await render_once(site, "/", RecordingGate(), timeout=1.0)
    finally:
        await site.close()
    assert result.error == RENDER_TIMEOUT
    assert site.url("/before-spin") in links_of(result.html, result.final_url)
    assert renderer.took < 1.0 + 5.0  # budget, snapshot grace, interrupt, snapshot, close


async def test_links_later_than_the_idle_window_are_not_waited_for(tag: None) -> None:
    # Documented behaviour: the page settles (network and DOM quiet for `idle`) before a
    # link its timer adds two seconds later; the render ends early, without that link.
    page = b"""<!doctype html><html><body><a href="/static">s</a><script>
setTimeout(() => { const a = document.createElement("a"); a.href = "/late";
  document.body.append(a); }, 2000);
</script></body></html>"""
    site = await Site({"/": (HTML, page)}).start()
    try:
        result, renderer = await render_once(site, "/", RecordingGate(), timeout=5.0, idle=0.3)
    finally:
        await site.close()
    assert result.error is None
    links = links_of(result.html, result.final_url)
    # had it waited, the link would be there: the render ended at about the idle window
    assert site.url("/static") in links and site.url("/late") not in links


SLOW_PAGE = b"""<!doctype html><html><body><a href="/static">s</a>
<script src="/slow.js"></script></body></html>"""


async def test_a_renderer_crash_is_render_crash_and_the_next_page_renders(tag: None) -> None:
    site = await Site({"/": (HTML, SLOW_PAGE), "/slow.js": (JS, b"1")}).start()
    site.delays["/slow.js"] = 30
    renderer = Renderer(RenderOptions(timeout=20), RecordingGate())
    try:
        task = asyncio.create_task(renderer.render(site.url("/"), SLOW_PAGE, {}))
        async with asyncio.timeout(30):
            while not renderer_pids() or site.hits["/slow.js"] == 0:
                await asyncio.sleep(0.05)
        for pid in renderer_pids():
            os.kill(pid, signal.SIGKILL)
        result = await asyncio.wait_for(task, 10)
        assert result.error == RENDER_CRASH and result.html is None
        site.delays.clear()
        again = await renderer.render(site.url("/"), SLOW_PAGE, {})
        assert again.error is None and site.url("/static") in links_of(again.html, site.url("/"))
    finally:
        await renderer.close()
        await site.close()


async def test_a_killed_browser_is_restarted(tag: None) -> None:
    site = await Site({"/": (HTML, SLOW_PAGE), "/slow.js": (JS, b"1")}).start()
    site.delays["/slow.js"] = 30
    gate = RecordingGate(per_host=4)
    renderer = Renderer(RenderOptions(timeout=20), gate)
    try:
        task = asyncio.create_task(renderer.render(site.url("/"), SLOW_PAGE, {}))
        async with asyncio.timeout(30):
            while site.hits["/slow.js"] == 0:
                await asyncio.sleep(0.05)
        (browser,) = browser_main_pids()
        os.kill(browser, signal.SIGKILL)
        result = await asyncio.wait_for(task, 10)
        assert result.error == RENDER_CRASH
        site.delays.clear()
        again = await renderer.render(site.url("/"), SLOW_PAGE, {})
        assert again.error is None and site.url("/static") in links_of(again.html, site.url("/"))
        assert renderer.restarts == 1
        assert browser not in browser_main_pids() and len(browser_main_pids()) == 1
    finally:
        await renderer.close()
        await site.close()
    assert gate.balanced()


async def test_a_page_using_gigabytes_is_stopped_at_the_heap_cap(tag: None) -> None:
    # 8 MB of JavaScript heap more at a time, up to 4 GB: the renderer dies at the heap cap
    # (launch.PAGE_HEAP_MB), the crawl goes on.
    page = b"""<!doctype html><a href=/static>s</a><script>
const keep = [];
while (keep.length < 512) keep.push(new Array(1024 * 1024).fill(keep.length + 0.5));
</script>"""
    site = await Site({"/": (HTML, page)}).start()
    renderer = Renderer(RenderOptions(timeout=30), RecordingGate())
    try:
        result = await renderer.render(site.url("/"), page, {})
        assert result.error == RENDER_CRASH, result
        again = await renderer.render(site.url("/"), b"<a href=/next>n</a>", {})
        assert again.error is None and site.url("/next") in links_of(again.html, site.url("/"))
    finally:
        await renderer.close()
        await site.close()


async def test_recycling_keeps_one_browser_at_a_time(tag: None) -> None:
    page = b"<!doctype html><a href=/x>x</a><script src=/s.js></script>"
    site = await Site({"/": (HTML, page), "/s.js": (JS, b"1")}).start()
    renderer = Renderer(RenderOptions(concurrency=2, recycle_after=3), RecordingGate(per_host=2))
    seen: set[int] = set()
    most = 0

    async def one() -> None:
        nonlocal most
        result = await renderer.render(site.url("/"), page, {})
        assert result.error is None, result.detail
        pids = browser_main_pids()
        most = max(most, len(pids))
        seen.update(pids)

    try:
        await asyncio.gather(*(one() for _ in range(9)))
        assert renderer.pages_rendered == 9
        assert renderer.recycled == 2 and renderer.restarts == 2
        assert most == 1 and len(seen) == 3
    finally:
        await renderer.close()
        await site.close()


async def test_a_reused_tab_carries_nothing_from_the_page_before(tag: None) -> None:
    # The first page leaves state, a beforeunload handler and a pending timer that would add
    # a link; the next page in the same tab must see none of it.
    first = b"""<!doctype html><a href=/one>1</a><script>
window.leak = 1; localStorage.leak = "";
addEventListener("beforeunload", e => { e.preventDefault(); e.returnValue = "stay"; });
setTimeout(() => { const a = document.createElement("a"); a.href = "/late-from-first";
  document.body.append(a); }, 1500);
</script>"""
    second = b"""<!doctype html><a href=/two>2</a><script>
const a = document.createElement("a");
a.href = typeof window.leak === "undefined" ? "/clean" : "/leaked"; document.body.append(a);
</script>"""
    site = await Site({"/1": (HTML, first), "/2": (HTML, second)}).start()
    renderer = Renderer(RenderOptions(concurrency=1, idle=0.2), RecordingGate())
    try:
        one = await renderer.render(site.url("/1"), first, {})
        assert one.error is None and site.url("/one") in links_of(one.html, one.final_url)
        tabs = len(renderer_pids())
        for _ in range(3):
            two = await renderer.render(site.url("/2#frag"), second, {})
            assert two.error is None, two.detail
            assert two.final_url == site.url("/2#frag")
            assert links_of(two.html, two.final_url) == {site.url("/two"), site.url("/clean")}
        await asyncio.sleep(1.5)  # the first page's timer would have fired by now
        three = await renderer.render(site.url("/2"), second, {})
        assert site.url("/late-from-first") not in links_of(three.html, three.final_url)
        assert len(renderer_pids()) <= tabs  # the same tab, no renderer process more
    finally:
        await renderer.close()
        await site.close()


async def test_a_missing_chromium_is_a_clear_error(tmp_path: Any) -> None:
    renderer = Renderer(RenderOptions(executable=str(tmp_path / "nochromium")), RecordingGate())
    with pytest.raises(RenderUnavailable, match="nochromium.*apt-get install chromium"):
        await renderer.render("http://127.0.0.1:9/", b"", {})
    await renderer.close()


async def test_no_process_before_the_first_render(tag: None) -> None:
    renderer = Renderer(RenderOptions(), RecordingGate())
    await asyncio.sleep(0.2)
    assert chromium_pids() == []
    await renderer.start()
    assert len(browser_main_pids()) == 1
    await renderer.close()
    assert chromium_pids() == []  # close waits for the browser to be gone


class _StuckGate(RecordingGate):
    """A gate that never answers for ``/stuck`` requests (a crawl's slot that never frees)."""

    def __init__(self) -> None:
        super().__init__()
        self.never = asyncio.Event()
        self.stuck = 0

    async def allow(self, url: str, resource_type: str, page_url: str) -> bool:
        if "/stuck" in url:
            self.stuck += 1
            await self.never.wait()
        return await super().allow(url, resource_type, page_url)


def _route_handler_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if not t.done() and "_on_route" in repr(t.get_coro())]


async def test_close_leaves_no_route_handler_pending(
    tag: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Route handlers still waiting on the gate when the renderer closes are ended by the
    close: none is left pending (asyncio would log "Task was destroyed but it is pending"
    for each, ``_on_route``, when the loop or the GC drops it)."""
    import gc  # noqa: PLC0415

    page = b"""<!doctype html><html><head><script src="/stuck/1.js"></script>
<script src="/stuck/2.js" async></script></head><body><div id="root"></div>
<script>fetch("/stuck/api.json").catch(() => {});</script></body></html>"""
    site = await Site({"/": (HTML, page), "/stuck/1.js": (JS, b"")}).start()
    gate = _StuckGate()
    renderer = Renderer(RenderOptions(timeout=1.0, concurrency=2), gate)
    try:
        result = await renderer.render(site.url("/"), page, {"Content-Type": "text/html"})
        assert result.error == RENDER_TIMEOUT  # its scripts never came
        assert gate.stuck >= 2 and _route_handler_tasks()  # still waiting on the gate
    finally:
        await renderer.close()
        await site.close()
    assert _route_handler_tasks() == []
    caplog.set_level("ERROR", logger="asyncio")
    del gate, renderer
    gc.collect()
    await asyncio.sleep(0)
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
