"""When the renderer takes a page's DOM, in a real headless Chromium (``pytest -m browser``).

The settle rule (crawler/render/settle.py): a page whose tracked work is done (timers due
within the budget, animation frames, fetch/XHR, intervals that change the DOM) settles after
`RenderOptions.quiet` (0.1 s), not after `idle` (0.5 s) of network and DOM quiet; a page
whose work goes on ends as before. The tests read the settle time the renderer reports
(`Rendered.settled`, on the page's clock) against marks the page writes into its DOM with
``performance.now()`` on the same clock: no wall clock of the test is asserted.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from crawler.extract import extract_links
from crawler.render import RENDER_TIMEOUT, Renderer, RenderOptions
from tests.render_common import (
    RecordingGate,
    Site,
    adopt_orphans,
    chromium_pids,
    needs_browser,
    wait_until_gone,
)

pytestmark = [*needs_browser, pytest.mark.timeout(180)]

HTML = "text/html"
IDLE = RenderOptions().idle  # 0.5 s: the rule before the tracker
# A page found settled within this of its last change settled by the tracked rule; the idle
# rule needs IDLE by construction. (quiet 0.1 s, polls 0.05 s, and slack for a busy machine.)
SOON = 0.35

LOADED_MARK = b"""<script>addEventListener("load", () => {
  document.body.dataset.loadedAt = String(performance.now()); });</script>"""


@pytest.fixture
async def tag() -> AsyncIterator[None]:
    """No Chromium process before the test, none left after it."""
    adopt_orphans()
    assert chromium_pids() == [], "a browser process from before the test"
    yield
    assert await wait_until_gone() == [], "a browser process was left behind"


async def render(pages: dict[str, tuple[str, bytes]], **options: Any) -> tuple[Any, str]:
    """``/`` of a site of ``pages`` rendered by a new renderer; the result and the page's URL."""
    site = await Site(pages).start()
    renderer = Renderer(RenderOptions(**options), RecordingGate())
    try:
        body = pages["/"][1]
        result = await renderer.render(site.url("/"), body, {"Content-Type": "text/html"})
    finally:
        await renderer.close()
        await site.close()
    return result, site.url("")


def links_of(result: Any) -> set[str]:
    assert result.html is not None
    return {link.url for link in extract_links(result.html, result.final_url, "utf-8")}


def mark(result: Any, name: str) -> float:
    """A ``data-NAME`` mark the page wrote (``performance.now()``), in seconds."""
    found = re.search(rb"data-" + name.encode() + rb'="([0-9.]+)"', result.html or b"")
    assert found is not None, f"the page did not write data-{name}"
    return float(found.group(1)) / 1000


async def test_a_timer_fetch_timer_chain_is_waited_for_and_settles_soon_after(tag: None) -> None:
    # 300 ms timer -> fetch() of JSON -> 300 ms timer -> the link: each wait is shorter than
    # `idle`, so the rule before also waited; it then took `idle` more after the link.
    page = b"""<!doctype html><html><body><a href="/static">s</a><div id="out"></div><script>
setTimeout(() => {
  fetch("/api/next.json").then(r => r.json()).then(d => {
    setTimeout(() => {
      const a = document.createElement("a"); a.href = d.href;
      document.getElementById("out").append(a);
      document.body.dataset.doneAt = String(performance.now());
    }, 300);
  });
}, 300);
</script></body></html>"""
    result, base = await render(
        {"/": (HTML, page), "/api/next.json": ("application/json", b'{"href": "/chained"}')}
    )
    assert result.error is None, result.detail
    assert {base + "/static", base + "/chained"} <= links_of(result)
    assert result.settled_by == "tracked"
    done = mark(result, "done-at")
    assert done >= 0.6  # the two timers ran
    assert 0 <= result.settled - done < SOON < IDLE


async def test_a_script_a_timer_inserts_is_waited_for(tag: None) -> None:
    # A chunk loader's way: a timer inserts <script src>, which takes 0.3 s to come and adds
    # a link when it runs. Its element counts as pending until it loaded.
    page = b"""<!doctype html><html><body><a href="/static">s</a><script>
setTimeout(() => {
  const s = document.createElement("script"); s.src = "/chunk.js"; document.head.append(s);
}, 50);
</script></body></html>"""
    chunk = b"""const a = document.createElement("a"); a.href = "/from-chunk";
document.body.append(a); document.body.dataset.doneAt = String(performance.now());"""
    site = await Site({"/": (HTML, page), "/chunk.js": ("application/javascript", chunk)}).start()
    site.delays["/chunk.js"] = 0.3
    renderer = Renderer(RenderOptions(), RecordingGate())
    try:
        result = await renderer.render(site.url("/"), page, {"Content-Type": "text/html"})
    finally:
        await renderer.close()
        await site.close()
    assert result.error is None, result.detail
    assert site.url("/from-chunk") in links_of(result)
    assert result.settled_by == "tracked"
    assert 0 <= result.settled - mark(result, "done-at") < SOON < IDLE


@pytest.mark.parametrize(
    "script",
    [
        b"let ticks = 0; setInterval(() => { ticks++; }, 30);",  # no DOM change
        b"let n = 0; requestAnimationFrame(function loop() { n++; requestAnimationFrame(loop); });",
        b"setTimeout(() => { document.title = 'late'; }, 60000);",  # after the budget
    ],
    ids=["interval", "animation-loop", "timer-after-the-budget"],
)
async def test_work_that_cannot_add_links_in_time_does_not_hold_the_page(
    tag: None, script: bytes
) -> None:
    page = b"<!doctype html><html><body><a href=/static>s</a><script>%s</script>%s</body></html>"
    result, base = await render({"/": (HTML, page % (script, LOADED_MARK))}, timeout=5.0)
    assert result.error is None, result.detail
    assert base + "/static" in links_of(result)
    assert result.settled_by == "tracked"
    assert 0 <= result.settled - mark(result, "loaded-at") < SOON < IDLE


async def test_a_page_whose_interval_keeps_adding_links_ends_at_its_budget(tag: None) -> None:
    # A change every 200 ms: longer than `quiet`, shorter than `idle`. The page is not done;
    # it ends at its budget with the links it had by then, as before the tracker.
    page = b"""<!doctype html><html><body><a href=/static>s</a><div id="out"></div><script>
let n = 0;
function add() {
  const a = document.createElement("a"); a.href = "/tick/" + (n++);
  document.getElementById("out").append(a);
}
setInterval(add, 200);
</script></body></html>"""
    result, base = await render({"/": (HTML, page)}, timeout=1.5)
    assert result.error == RENDER_TIMEOUT
    assert result.settled is None and result.settled_by == ""
    links = links_of(result)
    assert {base + "/static"} | {f"{base}/tick/{i}" for i in range(4)} <= links


async def test_changes_inside_a_shadow_root_keep_the_page_unsettled(tag: None) -> None:
    # An interval writes a link into a shadow root every 60 ms, 15 times (0.9 s): the DOM of
    # the shadow root changes, so the page is not quiet until the last one.
    page = b"""<!doctype html><html><body><div id="host"></div><script>
const root = document.getElementById("host").attachShadow({mode: "open"});
let n = 0;
const timer = setInterval(() => {
  const a = document.createElement("a"); a.href = "/shadow/" + (n++); root.append(a);
  if (n === 15) { clearInterval(timer); document.body.dataset.doneAt = String(performance.now()); }
}, 60);
</script></body></html>"""
    result, base = await render({"/": (HTML, page)}, timeout=5.0)
    assert result.error is None, result.detail
    assert {f"{base}/shadow/{i}" for i in range(15)} <= links_of(result)
    assert result.settled >= mark(result, "done-at")


async def test_without_the_tracker_the_idle_rule_settles_the_page(tag: None) -> None:
    # A page that removes the tracker (as an init script that failed would leave it): the
    # rule before, network and DOM quiet for `idle`, still settles it.
    page = b"""<!doctype html><html><body><a href=/static>s</a>
<script>delete window.__crawlerSettle;</script>%s</body></html>"""
    result, base = await render({"/": (HTML, page % LOADED_MARK)})
    assert result.error is None, result.detail
    assert base + "/static" in links_of(result)
    assert result.settled_by == "idle"
    assert result.settled - mark(result, "loaded-at") >= IDLE
