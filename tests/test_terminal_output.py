"""What a crawl prints that a page decides: no control character reaches the terminal raw.

A page's invalid link (a value that does not resolve) is listed by its raw value in the urls
format with ``--all-links``; ESC, BEL and the C1 controls (U+009B is a CSI on many terminals)
in it are written as ``\\xNN``, in every run (stdout a terminal or not), while ordinary
non-ASCII text stays as it is. The real console script against a real server on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path

from crawler.output.controls import escape_controls
from tests.test_cli import Serve, run, serve, site_app  # noqa: F401  (serve: the fixture)

# Hosts that do not resolve to a URL (a space, ESC, U+009B, BEL): each an invalid link.
HOSTILE = (
    '<a href="http://a\u009b31m b/">c1</a>'
    '<a href="http://e\x1b]0;owned\x07x b/">osc</a>'
    '<a href="http://caf\u00e9 \u00e9t\u00e9/">plain</a>'
    '<a href="/ok">ok</a>'
)


def test_escape_controls_is_c0_c1_and_del_only() -> None:
    assert escape_controls("a\x1b[1m\x07\x7f\u009b\u0085z") == "a\\x1b[1m\\x07\\x7f\\x9b\\x85z"
    assert (
        escape_controls("caf\u00e9 \u00a0 \u2028 \U0001f600")
        == "caf\u00e9 \u00a0 \u2028 \U0001f600"
    )


async def test_all_links_urls_output_escapes_c0_and_c1_controls(
    serve: Serve,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = await serve(site_app({"/": HOSTILE, "/ok": "<p>ok"}))
    done = await run("crawl", url + "/", "--ignore-robots", "--all-links", "--max-pages", "1")
    assert done.rc == 0, done.err
    for raw in ("\x1b", "\x07", "\u009b"):
        assert raw not in done.out, done.out
    lines = done.lines()
    assert "http://a\\x9b31m b/\tinvalid" in lines
    assert "http://e\\x1b]0;owned\\x07x b/\tinvalid" in lines
    assert "http://caf\u00e9 \u00e9t\u00e9/\tinvalid" in lines  # non-ASCII untouched
    assert url + "/ok" in lines
    # the same into a file (a machine format: escaped always, not only on a terminal)
    out = tmp_path / "urls.txt"
    done = await run(
        "crawl", url + "/", "--ignore-robots", "--all-links", "--max-pages", "1", "-o", str(out)
    )
    assert done.rc == 0, done.err
    text = out.read_text(encoding="utf-8")
    assert "\u009b" not in text and "\x1b" not in text
    assert "http://a\\x9b31m b/\tinvalid\n" in text
