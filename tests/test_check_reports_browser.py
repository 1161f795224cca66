"""The html report in a real browser: headless Chromium (``pytest -m browser``).

Needs ``/usr/bin/chromium`` (Debian: ``apt-get install chromium``), driven over the DevTools
protocol on 127.0.0.1. The report of tests/test_check_reports.py (every kind, hostile strings)
is opened from a file:// URL, and:

* it loads with no console error, no exception, no CSP violation and no dialog (a hostile URL
  that ran as script would open one), and the browser requests nothing but the file itself;
* the page's script ran (the CSP hash admits it) and the table sorts (numbers as numbers, both
  ways) and filters (text and kind), as a person clicking and typing would make it;
* a screenshot is taken (light and dark) and saved; with ``CHECK_REPORT_SCREENSHOT=PATH`` the
  light one of the viewport is also written to PATH (docs/check-report.png for the README).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from crawler.check import report_html
from crawler.check.report_common import visible
from tests.test_check_reports import all_problems, docs_report, full_report, render

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        shutil.which("chromium") is None, reason="needs chromium (apt-get install chromium)"
    ),
]


class Browser:
    """A headless Chromium page over DevTools that keeps every event it is sent."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._id = 0
        self._tmp = tempfile.mkdtemp(prefix="check-report-chromium-")

    async def __aenter__(self) -> Browser:
        args = [
            shutil.which("chromium") or "/usr/bin/chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            # Nothing leaves the machine: no name resolves, any request goes to a closed port.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--proxy-server=http://127.0.0.1:9",
            f"--user-data-dir={self._tmp}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        self._err = open(Path(self._tmp) / "stderr.log", "w+b")  # noqa: SIM115
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._err)
        port_file = Path(self._tmp) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or len(port_file.read_text().split("\n")) < 2:
            assert self._proc.poll() is None and time.monotonic() < deadline, "no chromium"
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().split("\n")[:2]
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        target = await self.call("Target.createTarget", url="about:blank")
        att = await self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        self._sid = att["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.call(f"{domain}.enable", self._sid)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._ws.close()
        await self._session.close()
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._err.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    async def call(self, method: str, sid: str | None = None, **params: Any) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if sid:
            msg["sessionId"] = sid
        await self._ws.send_str(json.dumps(msg))
        while True:
            reply = await self._ws.receive_json()
            if reply.get("id") == self._id:
                assert "error" not in reply, (method, reply["error"])
                return reply["result"]
            if "method" in reply:
                self.events.append(reply)

    async def page(self, method: str, **params: Any) -> Any:
        return await self.call(method, self._sid, **params)

    async def js(self, expr: str) -> Any:
        """The value of ``expr`` in the page (a JSON round trip); raises on an exception."""
        res = await self.page("Runtime.evaluate", expression=f"JSON.stringify({expr})")
        assert "exceptionDetails" not in res, res["exceptionDetails"]
        return json.loads(res["result"]["value"])

    async def load(self, url: str) -> None:
        await self.page("Page.navigate", url=url)
        deadline = time.monotonic() + 30
        while await self.js("[document.readyState, location.href]") != ["complete", url]:
            assert time.monotonic() < deadline, f"{url} did not load"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # late console messages and requests arrive as events
        await self.js("1")

    async def screenshot(self, path: Path, *, full: bool) -> bytes:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full}
        if full:
            size = await self.js(
                "[document.documentElement.scrollWidth, document.body.scrollHeight]"
            )
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
        data = base64.b64decode((await self.page("Page.captureScreenshot", **params))["data"])
        path.write_bytes(data)
        return data


def problems_of(events: list[dict[str, Any]]) -> list[Any]:
    """Console errors, exceptions, CSP or other error log entries, dialogs."""
    bad: list[Any] = []
    for e in events:
        m, p = e["method"], e.get("params", {})
        if m == "Runtime.exceptionThrown" or m == "Page.javascriptDialogOpening":
            bad.append((m, p))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            bad.append((m, p.get("args")))
        elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            bad.append((m, p["entry"].get("text")))
    return bad


COLUMN_JS = "Array.from(document.querySelectorAll('#occ tbody tr')).filter(r => !r.hidden)"


async def column(b: Browser, index: int) -> list[str]:
    return await b.js(f"{COLUMN_JS}.map(r => r.cells[{index}].textContent)")


async def click_heading(b: Browser, name: str) -> str:
    return await b.js(
        "(() => { const th = Array.from(document.querySelectorAll('#occ th'))"
        f".find(h => h.textContent === {json.dumps(name)}); th.click();"
        " return th.getAttribute('aria-sort'); })()"
    )


async def set_filter(b: Browser, text: str | None = None, kind: str | None = None) -> str:
    if text is not None:
        await b.js(
            f"(() => {{ const q = document.getElementById('q'); q.value = {json.dumps(text)};"
            " q.dispatchEvent(new Event('input')); return 1; })()"
        )
    if kind is not None:
        await b.js(
            f"(() => {{ const k = document.getElementById('kind'); k.value = {json.dumps(kind)};"
            " k.dispatchEvent(new Event('change')); return 1; })()"
        )
    return await b.js("document.getElementById('shown').textContent")


def test_html_report_in_chromium(tmp_path: Path) -> None:
    report = full_report()
    html_file = tmp_path / "report.html"
    html_file.write_text(render(report_html, report), encoding="utf-8")
    url = html_file.as_uri()
    n_rows = sum(max(1, len(p.referrers)) for p in all_problems(report))

    async def run() -> None:
        async with Browser() as b:
            await b.page(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=1500,
                deviceScaleFactor=1,
                mobile=False,
            )
            await b.load(url)
            assert problems_of(b.events) == []
            requested = [
                e["params"]["request"]["url"]
                for e in b.events
                if e["method"] == "Network.requestWillBeSent"
            ]
            assert requested == [url]
            # The hostile values stayed text: one script (ours), no image, no dialog.
            assert await b.js("document.scripts.length") == 1
            assert await b.js("document.images.length") == 0
            text = await b.js("document.body.textContent")
            for p in report.broken:
                assert visible(p.url) in text

            # Filter: the page's script ran (CSP admits it by hash) and counts the rows.
            assert await set_filter(b) == f"{n_rows} of {n_rows} shown"
            assert await set_filter(b, text="ÜNÏCÖDÉ") == f"25 of {n_rows} shown"
            assert await set_filter(b, text="", kind="timeout") == f"1 of {n_rows} shown"
            broken_n = sum(max(1, len(p.referrers)) for p in report.broken)
            assert await set_filter(b, kind="broken") == f"{broken_n} of {n_rows} shown"
            assert await b.js(f"{COLUMN_JS}.every(r => r.className === 'broken')")
            assert await set_filter(b, text="many/1", kind="") == f"11 of {n_rows} shown"
            assert await set_filter(b, text="") == f"{n_rows} of {n_rows} shown"

            # Sort: numbers as numbers, both ways; text in locale order.
            assert await click_heading(b, "Line") == "ascending"
            lines = [int(v) if v else -1 for v in await column(b, 4)]
            assert lines == sorted(lines) and max(lines) == 6003
            assert await click_heading(b, "Line") == "descending"
            lines = [int(v) if v else -1 for v in await column(b, 4)]
            assert lines == sorted(lines, reverse=True)
            assert await click_heading(b, "URL") == "ascending"
            urls = await column(b, 0)
            assert urls == await b.js(
                f"{json.dumps(urls)}.slice().sort((a, b) => a.localeCompare(b))"
            )
            # Sorting keeps the filter.
            await set_filter(b, text="many/")
            assert await click_heading(b, "Col") == "ascending"
            cols = [int(v) for v in await column(b, 5)]
            assert cols == list(range(2, 27))
            await set_filter(b, text="")

            await b.js("window.scrollTo(0, 0)")
            light = await b.screenshot(tmp_path / "report.png", full=False)
            full = await b.screenshot(tmp_path / "report-full.png", full=True)
            await b.page(
                "Emulation.setEmulatedMedia",
                features=[{"name": "prefers-color-scheme", "value": "dark"}],
            )
            await b.screenshot(tmp_path / "report-dark.png", full=False)
            assert problems_of(b.events) == []
            for shot in (light, full):
                assert shot.startswith(b"\x89PNG") and len(shot) > 20_000
            target = os.environ.get("CHECK_REPORT_SCREENSHOT")
            if target:
                Path(target).write_bytes(light)

    asyncio.run(run())


# Lines of a URL or raw value break between two characters that are not both letters or
# digits (at a "/", "-", "?", "#", "&" ...), never inside a name: [pieces, breaks, bad ones].
SPLIT_JS = """
(() => { let pieces = 0, breaks = 0, bad = [];
  const word = /[A-Za-z0-9]/;
  for (const r of Array.from(document.querySelectorAll('#occ tbody tr')).filter(r => !r.hidden))
    for (const cell of [r.cells[0], r.cells[3], r.cells[7]]) {
      const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      let last = null, prev = '';
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        pieces++;
        const range = document.createRange();
        for (let i = 0; i < n.length; i++) {
          range.setStart(n, i); range.setEnd(n, i + 1);
          const top = Math.round(range.getBoundingClientRect().top), ch = n.data[i];
          if (last !== null && top > last) {
            breaks++;
            if (word.test(prev) && word.test(ch)) bad.push(n.data.slice(0, i) + '|' + ch);
          }
          last = top; prev = ch;
        }
      }
    }
  return [pieces, breaks, bad.slice(0, 5)]; })()
"""


def test_html_large_table_pages_wraps_and_works_without_script(tmp_path: Path) -> None:
    report = docs_report()
    n_rows = sum(len(p.referrers) for p in report.broken)
    html_file = tmp_path / "big.html"
    html_file.write_text(render(report_html, report), encoding="utf-8")
    url = html_file.as_uri()
    page_rows = report_html.PAGE_ROWS

    async def run() -> None:
        async with Browser() as b:
            await b.page(
                "Emulation.setDeviceMetricsOverride",
                width=1280,
                height=1000,
                deviceScaleFactor=1,
                mobile=False,
            )
            await b.load(url)
            assert problems_of(b.events) == []
            shown = "document.querySelectorAll('#occ tbody tr:not([hidden])').length"
            pageno = "document.getElementById('pageno').textContent"
            assert await b.js(shown) == page_rows
            assert (
                await b.js(pageno)
                == f"rows 1\u2013{page_rows}, page 1 of {-(-n_rows // page_rows)}"
            )
            assert await b.js("document.getElementById('shown').textContent") == (
                f"{n_rows} of {n_rows} shown"
            )
            first = await column(b, 7)
            await b.js("(document.getElementById('next').click(), 1)")
            assert (
                await b.js(pageno)
                == f"rows {page_rows + 1}\u2013{2 * page_rows}, page 2 of {-(-n_rows // page_rows)}"
            )
            second = await column(b, 7)
            assert len(second) == page_rows and not set(first) & set(second)
            await b.js("(document.getElementById('prev').click(), 1)")
            assert await column(b, 7) == first
            # the filter pages what it keeps, from its first page
            await b.js("(document.getElementById('next').click(), 1)")
            assert await set_filter(b, text="method-overview-3") == f"300 of {n_rows} shown"
            assert (
                await b.js(pageno) == f"rows 1\u2013{page_rows}, page 1 of {-(-300 // page_rows)}"
            )
            assert all(v.endswith("method-overview-3") for v in await column(b, 7))
            await set_filter(b, text="configuration-api-7.html")
            assert await b.js("document.getElementById('pager').hidden") is True
            await set_filter(b, text="")
            # a page of the table, not 1,200 rows: the whole report in a few screens
            height = await b.js("document.documentElement.scrollHeight")
            assert height < 7_000, height  # 194,685 px before the table had pages
            pieces, breaks, bad = await b.js(SPLIT_JS)
            assert pieces > page_rows * 3 and breaks > page_rows and bad == [], bad
            await b.screenshot(tmp_path / "big.png", full=True)

            # Without script: every row shows (nothing hides them).
            await b.page("Emulation.setScriptExecutionDisabled", value=True)
            await b.load(url)
            assert await b.js(shown) == n_rows
            assert await b.js("document.getElementById('pager').hidden") is True
            target = os.environ.get("CHECK_REPORT_BIG_SCREENSHOT")
            if target:
                Path(target).write_bytes((tmp_path / "big.png").read_bytes())

    asyncio.run(run())
