"""Foreign content (svg/math) in the pure-Python twin: the inline loop `_foreign_tags` does
what the general path does, and its work grows with the input, not with the depth or the tag
count times anything (counted, not timed)."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.extract import Link, LinkExtractorPy
from crawler.extract._tree import _MAX_FOREIGN_DEPTH
from tests.extract_common import BASE


class _GeneralPath(LinkExtractorPy):
    """The pure twin without its foreign-content loop: every tag through `_tag_match`, the
    way each tag went before the loop existed (the reference the loop must agree with)."""

    def _foreign_tags(self, buf: bytes, pos: int, out: list[Link]) -> int:
        return pos


def _state(ex: Any) -> tuple[Any, ...]:
    """What the tree builder's part knows: the foreign stack (zero counts left out: a name
    counted down to 0 and one never seen mean the same), the frameset state, the tokenizer."""
    f = ex._fst
    return (
        list(f.runs),
        list(f.keys),
        list(f.counts),
        {k: v for k, v in f.open.items() if v},
        list(f.html),
        {k: v for k, v in f.hopen.items() if v},
        ex._fs.mode,
        ex._fs.view,
        list(ex._fs.templates),
        ex._fmode,
        ex._state,
        ex._form,
    )


def _run(cls: Any, data: bytes, sizes: list[int], **kw: Any) -> tuple[Any, ...]:
    ex = cls(BASE, "utf-8", **kw)
    ex._strict = True
    out: list[Link] = []
    states = []
    i = 0
    for k in [*sizes, len(data)]:
        out += ex.feed(data[i : i + k])
        states.append(_state(ex))
        i += k
    out += ex.close()
    return out, states, sorted(ex.ids), ex.ids_complete


LONG = "q" * 300  # a name over the 256 bytes kept
PIECES = [
    "<svg>", "</svg>", "<SVG>", "<math>", "</math>", "<g>", "</g>", "<G>", "</G >", "<g/>",
    "<g />", "<g id=i1>", "<g id='i2'/>", "<h>", "</h>", "<g class='a/b' x=y>", "<path d=M0/>",
    "<mi>", "</mi>", "<mo>", "<mtext>", "</mtext>", "<foreignObject>", "</foreignObject>",
    "<desc>", "</desc>", "<title>", "</title>", "<annotation-xml encoding=text/html>",
    "<annotation-xml>", "</annotation-xml>", "<mglyph>", "<malignmark>", "<a href=A>",
    "<a id=x href=B/>", "</a>", "<font color=red>", "<font>", "</font>", "<p>", "</p>", "<br>",
    "</br>", "<b>", "</b>", "<div>", "</div>", "<div id=d>", "<td>", "</td>", "<table>",
    "</table>", "<tr>", "<form>", "</form>", "<template>", "</template>", "<frameset>",
    "<frame src=F>", "<body>", "</body>", "</html>", "text", " ", "\n", "<!-- c -->",
    "<![CDATA[x]]>", "<![CDATA[", "]]>", "<!x>", "<?pi>", "<", "</", "</>", "<iframe src=I>",
    "<style>", "</style>", "<script>", "</script>", "<textarea>", "</textarea>", "<img src=S>",
    f"<{LONG}>", f"</{LONG}>", "<a href='unclosed", "<g\tx='>'>",
    # Where the rules meet, in one piece (the odds of drawing them in order are slim):
    "<math><annotation-xml><svg>", "<math><annotation-xml encoding=text/html><svg>",
    "<svg><desc><div>", "<svg><foreignObject><b>", "<svg><title><p>", "<math><mi><svg>",
    "<form><svg>", "<svg></form>", "<template><svg>", "<table><td><svg><desc><i>",
]  # fmt: skip
DOCS = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)
SPLITS = st.lists(st.integers(min_value=1, max_value=40), max_size=30)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=DOCS,
    sizes=SPLITS,
    collect_ids=st.booleans(),
    link_set=st.sampled_from(["links", "resources"]),
)
def test_foreign_loop_agrees_with_the_general_path(
    doc: str, sizes: list[int], collect_ids: bool, link_set: str
) -> None:
    """Links (with their positions), fragment targets and, after every chunk, the state of
    the stack of open elements and of the tokenizer are those of the general path."""
    data = doc.encode()
    kw = {"collect_ids": collect_ids, "link_set": link_set}
    assert _run(LinkExtractorPy, data, sizes, **kw) == _run(_GeneralPath, data, sizes, **kw)


# One document for each rule the loop leaves to the general path or does itself.
RULES = [
    "<math><annotation-xml><svg><g></g></svg><a href=A>",  # svg under annotation-xml
    "<math><annotation-xml encoding=text/html><div><a href=A>",  # an HTML integration point
    "<svg><desc><div></td><a href=A><style><a href=B></style>",  # table end: cell closed
    "<svg><desc><div></x></div></desc></svg><style><a href=A></style><a href=B>",
    "<form><svg></form></svg><form action=F>",  # the form pointer
    "<svg><g></p><a href=A><style><a href=B></style>",  # </p> leaves foreign content
    "<svg><desc></p><style><a href=A></style><a href=B>",  # ... up to an integration point
    "<svg></br><style><a href=A></style><a href=B>",
    f"<svg><{LONG}><g></{LONG}></g></svg><style><a href=A></style>",  # long names
    "<svg><g/><g /><g x=y/></g><path d=M/></svg><style><a href=A></style>",  # self-closing
    "<svg><a href=A id=i><font><a href=B></font><font color=red><a href=C>",
    "<svg><g id=i1><h id=i2 /></h><math><mi id=i3><b id=i4>",
    "<template><svg><g></template><a href=A>",
    "<svg><frameset><frame src=F></svg><body></body></html><a href=A>",
]


@pytest.mark.parametrize("doc", RULES)
@pytest.mark.parametrize("link_set", ["links", "resources"])
@pytest.mark.parametrize("collect_ids", [False, True])
def test_foreign_loop_agrees_on_each_rule(doc: str, link_set: str, collect_ids: bool) -> None:
    data = doc.encode()
    for sizes in ([], [1] * len(data), [3, 7] * 10):
        kw = {"collect_ids": collect_ids, "link_set": link_set}
        assert _run(LinkExtractorPy, data, sizes, **kw) == _run(_GeneralPath, data, sizes, **kw)


def test_foreign_loop_agrees_on_the_deep_documents() -> None:
    """Past the cap of recorded runs, with its end tags, and back out, in 1 KiB chunks."""
    deep = "<svg>" + "<g><h>" * (_MAX_FOREIGN_DEPTH + 10)
    docs = [
        deep + "</h></g>" * 20 + "</x>" * 50 + "<a href=A1>" + "</g>" * 2000 + "<a href=A2>",
        "<math><mi><svg>" * 700 + "</p>" * 30 + "<a href=A3>" + "</svg>" * 800 + "<a href=A4>",
        "<svg><desc><div>" * 400 + "</div></x></desc>" * 300 + "</td><a href=A5>",
        "<svg>" + "<g>" * 5000 + "text" + "</g>" * 4999 + "</svg><a href=A6><svg><a href=A7>",
    ]
    for doc in docs:
        data = doc.encode()
        sizes = [1024] * (len(data) // 1024)
        got = _run(LinkExtractorPy, data, sizes)
        assert got == _run(_GeneralPath, data, sizes)
        assert got[0], doc[:40]  # (links at all: the documents do reach their end)


def _benchmark_inputs(size: int) -> dict[str, bytes]:
    """benchmarks/extract.py's foreign-content pathological inputs, ``size`` bytes or so."""
    return {
        "deep runs, unmatched end tags": b"<svg>" + b"<g><h>" * 512 + b"</x>" * (size // 4),
        "nested <g>, never closed": b"<svg>" + b"<g>" * (size // 3),
        "integration points, </p>": b"<math><mi><svg>" * (size // 30) + b"</p>" * (size // 8),
    }


def _count(data: bytes) -> tuple[int, int]:
    """(Python function calls, builtin calls) made while the pure twin reads ``data`` in 1 KiB
    chunks: the work done, counted by the interpreter, whatever the machine's speed."""
    calls = [0, 0]

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            calls[0] += 1
        elif event == "c_call":
            calls[1] += 1

    ex = LinkExtractorPy(BASE, "utf-8")
    sys.setprofile(profile)
    try:
        for i in range(0, len(data), 1024):
            ex.feed(data[i : i + 1024])
        ex.close()
    finally:
        sys.setprofile(None)
    return calls[0], calls[1]


@pytest.mark.parametrize("case", list(_benchmark_inputs(0)))
def test_foreign_tags_cost_no_python_call_each_and_linear_work(case: str) -> None:
    """1x, 4x and 16x the input: the work a byte (every call counted) does not grow, and
    Python-level calls grow with the chunks, not with the tags: a tag that only moves the
    stack of open svg/math elements is handled in the loop, not by a chain of methods."""
    sizes = [16_384, 65_536, 262_144]
    data = [_benchmark_inputs(s)[case] for s in sizes]
    counts = [_count(d) for d in data]
    per_byte = [(py + c) / len(d) for (py, c), d in zip(counts, data, strict=True)]
    assert per_byte[1] <= per_byte[0] * 1.05 and per_byte[2] <= per_byte[0] * 1.05, per_byte
    # The first input's calls include the one-off work (past the depth cap, the first </p>
    # leaving 1,000 runs at once); what more input adds is per chunk.
    chunks = [-(-len(d) // 1024) for d in data]
    for k in (1, 2):
        more_calls = counts[k][0] - counts[0][0]
        more_chunks = chunks[k] - chunks[0]
        tags = (len(data[k]) - len(data[0])) // 4
        assert more_calls <= 24 * more_chunks, (more_calls, more_chunks, tags)
