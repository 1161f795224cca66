"""``crawler audit`` as a command: its formats (json with the documented fields, markdown,
sarif valid against the 2.1.0 schema, text), exit codes and bad options."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from aiohttp import web
from audit_site import EXPECTED, site_app

pytestmark = pytest.mark.timeout(120)
_ROOT = Path(__file__).resolve().parent.parent


async def _exec(*argv: str) -> tuple[int, str, str]:
    """``python ARGV...`` with this tree on the path: (exit code, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(_ROOT))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _run(*args: str) -> tuple[int, str, str]:
    return await _exec("-m", "crawler", "audit", *args)


async def test_json_report_and_exit_code(serve: Any, tmp_path: Path) -> None:
    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    target = tmp_path / "audit.json"
    code, _, err = await _run(base + "/", "-q", "-f", "json", "-o", str(target))
    assert code == 1, err  # findings
    data = json.loads(target.read_text())
    assert data["complete"] is True and data["limit"] is None
    got = {(f["kind"], f["url"].removeprefix(base)) for f in data["findings"]}
    assert got == EXPECTED
    assert sum(data["counts"].values()) == len(EXPECTED)
    moved = next(f for f in data["findings"] if f["kind"] == "redirect")
    assert moved["group"] == "redirects" and moved["target"] == base + "/about"
    assert set(moved["places"][0]) == {"page", "line", "column", "tag", "attr", "raw"}
    assert data["stats"]["depth"]["5"] == 1 and data["stats"]["max_click_depth"] == 4


async def test_markdown_sarif_and_text(serve: Any, tmp_path: Path) -> None:
    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    code, md, _ = await _run(base + "/", "-q", "-f", "markdown", "--max-click-depth", "5")
    assert code == 1
    assert "## Redirects" in md and "| 5 | 1 |" in md
    assert "deeper than" not in md  # --max-click-depth 5: /d5 is not too deep
    code, sarif_text, _ = await _run(base + "/", "-q", "-f", "sarif")
    sarif = json.loads(sarif_text)
    schema = json.loads((_ROOT / "tests/data/sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(sarif, schema)
    results = sarif["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {kind for kind, _ in EXPECTED}
    moved = [
        r
        for r in results
        if r["ruleId"] == "redirect" and r["properties"]["url"].endswith("/moved")
    ]
    assert len(moved) == 2  # one a place that links it
    assert all(r["locations"][0]["physicalLocation"]["region"]["startLine"] > 0 for r in moved)
    code, text, _ = await _run(base + "/", "-q")
    assert "[orphans] Orphans" in text and f"{base}/sitemap.xml:5:6" in text


async def test_no_finding_exits_0(serve: Any) -> None:
    async def page(request: web.Request) -> web.Response:
        other = "/b" if request.path == "/" else "/"
        body = f'<html><head><link rel=canonical href="{request.path}"></head><body>'
        body += f'<a href="{other}">x</a><a href="/c">c</a></body></html>'
        return web.Response(text=body, content_type="text/html")

    async def c_page(request: web.Request) -> web.Response:
        return web.Response(text='<a href="/">home</a><a href="/b">b</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/b", page)
    app.router.add_get("/c", c_page)
    server = await serve(app)
    code, out, err = await _run(str(server.make_url("/")), "-q")
    assert code == 0, out + err
    assert "0 findings" in out


async def _python(code: str, *args: str) -> tuple[int, str, str]:
    return await _exec("-c", code, *args)


async def test_the_command_ends_without_tearing_its_heap_down(serve: Any) -> None:
    # A real command line ends by os._exit once the report is out (the interpreter's
    # teardown of the link graph was ~0.1 s of the rustdoc audit: benchmarks/AUDIT.md): no
    # exit hook runs, yet the report on the pipe is whole and the exit code the audit's.
    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    hook = "import atexit, sys; atexit.register(lambda: sys.stderr.write('TEARDOWN'))"
    args = ("audit", base + "/", "-q", "-f", "json")
    code, out, err = await _python(
        f"{hook}; from crawler.cli.main import main; raise SystemExit(main())", *args
    )
    assert code == 1, err
    assert "TEARDOWN" not in err
    data = json.loads(out)
    assert {(f["kind"], f["url"].removeprefix(base)) for f in data["findings"]} == EXPECTED
    # a caller in-process gets the code back, and the interpreter ends as usual
    code, out, err = await _python(
        f"{hook}; from crawler.cli.main import main; print('RETURNED', main(sys.argv[1:]))",
        *args,
    )
    assert code == 0, err
    assert "TEARDOWN" in err and out.rstrip().endswith("RETURNED 1")
    assert {
        (f["kind"], f["url"].removeprefix(base))
        for f in json.loads(out.rpartition("RETURNED")[0])["findings"]
    } == EXPECTED


async def test_bad_options_name_the_flag() -> None:
    code, _, err = await _run("http://127.0.0.1:9/", "--max-click-depth", "-1")
    assert code == 2 and "--max-click-depth" in err
    code, _, err = await _run("http://127.0.0.1:9/", "--sitemap", "ftp://x/s.xml")
    assert code == 2 and "--sitemap" in err
    code, _, err = await _run()
    assert code == 2 and "no URL" in err


async def test_html_report(serve: Any, tmp_path: Path) -> None:
    """The html report: self-contained (a CSP, nothing loaded), the depth chart, a section a
    group with every finding, and the site's strings escaped."""
    import html5lib  # noqa: PLC0415  (the test extra)

    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    target = tmp_path / "audit.html"
    code, _, err = await _run(base + "/", "-q", "-f", "html", "-o", str(target))
    assert code == 1, err
    text = target.read_text()
    doc = html5lib.parse(text, namespaceHTMLElements=False)
    csp = doc.find(".//meta[@http-equiv='Content-Security-Policy']")
    assert csp is not None and "default-src 'none'" in csp.get("content")
    assert not doc.findall(".//script[@src]") and not doc.findall(".//link[@href]")
    svg = "{http://www.w3.org/2000/svg}"
    chart = doc.find(f".//section[@id='click-depth']/{svg}svg")
    assert chart is not None
    bars = [g.find(f"{svg}title").text for g in chart.iter(f"{svg}g")]
    assert bars == [
        f"depth {d}: {n} page{'s' if n != 1 else ''}"
        for d, n in [("0", 1), ("1", 26), ("2", 2), ("3", 2), ("4", 2), ("5", 1)]
    ]
    groups = [
        s.get("id") for s in doc.findall(".//section") if s.get("id") not in (None, "click-depth")
    ]
    assert groups == ["orphans", "redirects", "canonical", "hreflang", "depth", "indexability"]
    badges = [span.text for span in doc.iter("span") if span.get("class") == "badge warn"]
    assert sorted(badges) == sorted(kind for kind, _ in EXPECTED)


async def test_a_resumed_state_reports_what_a_run_in_one_go_does(
    serve: Any, tmp_path: Path
) -> None:
    """With --state DIR, a second run replays the pages the first finished (their links
    with nofollow, their heads' canonical/hreflang/robots, their headers) from the journal:
    the same findings, places and all."""
    server = await serve(site_app())
    base = str(server.make_url("/"))
    state = str(tmp_path / "state")
    reports = []
    for _ in range(2):
        code, out, err = await _run(base, "-q", "-f", "json", "--state", state)
        assert code == 1, err
        reports.append(json.loads(out))
    first, again = reports
    assert len(first["findings"]) == len(EXPECTED)
    assert again["findings"] == first["findings"]
    assert again["stats"]["depth"] == first["stats"]["depth"]
