"""A page's links recorded as occurrences (``crawler.urls.occurrences``): the compiled twin
(``_occur_c.take``, reading the extractor's ``LinkRecord`` as it is kept, or Links) and the
pure one (``Occurrences.take_py``) give the same columns (contents and widths), the same
interned strings and ids, and call ``target_of`` for the same links in the same order, at the
limits: a column widened by a line or column past 65,535 or 2**32, or by a 256th tag/attr
pair, values repeated across pages (interning), a page with no link or only refused links,
very long values, non-ASCII ones, escapes, fragments, schemes, invalid URLs."""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import tracemalloc
from array import array
from collections import Counter
from typing import Any

import pytest

from crawler.check.findings import Findings
from crawler.config import CrawlConfig
from crawler.extract import LinkExtractorC, LinkExtractorPy, LinkRecord
from crawler.extract._link import make_link
from crawler.urls import occurrences
from crawler.urls.intake import IntakeC
from crawler.urls.occurrences import Interner, Occurrences
from crawler.urls.policy import UrlPolicy
from tests.test_intake import _dense_page

take_c: Any = occurrences._take_c
needs_c = pytest.mark.skipif(
    take_c is None or LinkRecord is None or IntakeC is None,
    reason="the compiled twins are not built",
)

SEED = "http://site.example/"
_COLUMNS = ("_target", "_run_page", "_run_start", "_line", "_col", "_tagattr", "_raw",
            "_nofollow", "_line_wide_at", "_line_wide", "_col_wide_at", "_col_wide")  # fmt: skip


class _Targets:
    """A ``target_of`` that records its calls and makes targets as the checker does (a
    ``data:`` URL refused, anything else a key of its own)."""

    def __init__(self, check_frags: bool) -> None:
        self.interner = Interner()
        self.calls: list[tuple[str | None, str]] = []
        self.policy = UrlPolicy([SEED])
        self.check_frags = check_frags

    def __call__(self, url: str | None, raw: str) -> int:
        self.calls.append((url, raw))
        if url is None:
            return self.interner.id("\0i" + raw)
        canon = self.policy.canonical_resolved(url)
        if canon is None:
            return -1 if url.startswith("data:") else self.interner.id("\0s" + url)
        if self.check_frags and "#" in raw and raw.partition("#")[2]:
            canon += "#" + raw.partition("#")[2]
        return self.interner.id(canon)


def _state(occ: Occurrences, targets: _Targets) -> dict[str, Any]:
    cols = {name: (getattr(occ, name).typecode, getattr(occ, name).tolist()) for name in _COLUMNS}
    return {
        **cols,
        "pages": [occ.pages[i] for i in range(len(occ.pages))],
        "raws": [occ.raws[i] for i in range(len(occ.raws))],
        "tags": [occ.tags[i] for i in range(len(occ.tags))],
        "positions": [occ.position(i) for i in range(len(occ))],
        "targets": list(targets.interner.strings),
        "calls": targets.calls,
    }


def _both(pages: list[tuple[str, Any, Any]], check_frags: bool) -> tuple[Any, Any, list[int]]:
    """Each page's links through the compiled twin (``c_links``) and the pure one
    (``py_links``), in order: both states and the counts (equal between them)."""
    occ_c, occ_py = Occurrences(), Occurrences()
    t_c, t_py = _Targets(check_frags), _Targets(check_frags)
    counts = []
    for url, c_links, py_links in pages:
        n_c = take_c(occ_c, occ_c.page_id(url), c_links, t_c.interner, t_c, check_frags)
        n_py = occ_py.take_py(occ_py.page_id(url), py_links, t_py.interner, t_py, check_frags)
        assert n_c == n_py
        counts.append(n_c)
    return _state(occ_c, t_c), _state(occ_py, t_py), counts


def _record(data: bytes, url: str) -> Any:
    ex = LinkExtractorC(url, None, intake=IntakeC(UrlPolicy([SEED])), record=True)
    ex._strict = True
    ex.feed(data)
    ex.close()
    return ex.record


def _py_links(data: bytes, url: str) -> list[Any]:
    ex = LinkExtractorPy(url, None)
    return ex.feed(data) + ex.close()  # type: ignore[no-any-return]


_ODD = (
    '<a href="/plain">x</a><a href="/plain#top">f</a><a href="/x%41y">e</a>'
    '<a href="/x%%341">ee</a><a href="/caf\u00e9">u</a><a href="http://[bad">i</a>'
    '<a href="mailto:a@b">m</a><img src="data:,x"><a href="/a&amp;b">amp</a>'
    '<a href="#">h</a><a href="">empty</a><a href="  /sp  ">ws</a>'
    '<a href="/plain" rel="nofollow">nf</a><link rel=stylesheet href="/s.css">'
    '<img srcset="/a.png 1x, /b.png 2x"><a href="javascript:void(0)">js</a>'
)


@needs_c
@pytest.mark.parametrize("check_frags", [False, True])
def test_the_twins_record_the_same_occurrences_from_the_extractors_record(
    check_frags: bool,
) -> None:
    rng = random.Random(7)
    long_value = "/" + "v" * 70_000  # a column past 65,535 for what follows it
    pages: list[tuple[str, bytes]] = [
        (SEED, _ODD.encode()),
        (SEED + "empty", b"<p>no links here</p>"),
        (SEED + "refused", b'<a href="data:,a">a</a><a href="data:,b">b</a>'),
        (SEED + "dense1", _dense_page(rng, 400)),
        (SEED + "dense2", _dense_page(rng, 400)),  # the same targets and raws again
        (SEED + "long", f'<a href="{long_value}">l</a><a href="/after">a</a>'.encode()),
        (SEED + "lines", ("\n" * 70_000 + '<a href="/deep">d</a>' + _ODD).encode()),
        (SEED + "utf8", "<a href='/\u00fc\u00e9'>\u00fc</a><a href='/plain'>p</a>".encode()),
        (SEED, _ODD.encode()),  # a page again (a new run of the same page id)
        # 3,000 new targets and raw values (the compiled twin's tables grow, twice), then
        # the same links again: found in the grown tables
        (SEED + "many", "".join(f'<a href="/g{i}">g</a>' for i in range(3000)).encode()),
        (SEED + "many2", "".join(f'<a href="/g{i}">g</a>' for i in range(3000)).encode()),
    ]
    made = [(url, _record(data, url), _py_links(data, url)) for url, data in pages]
    for _, rec, links in made:
        assert type(rec) is LinkRecord and list(rec) == links  # (the same links, two ways)
    c_state, py_state, counts = _both(made, check_frags)
    assert c_state == py_state
    # the limits were reached: the line and column columns stay 1 and 2 bytes (steps),
    # the lines and columns that do not fit in their side tables and read back whole; a
    # page with no link
    assert c_state["_line"][0] == "B" and c_state["_col"][0] == "H"
    assert c_state["_line_wide_at"][1] and c_state["_col_wide_at"][1]
    assert c_state["positions"] == [
        (link[5], link[6])
        for _, _, links in made
        for link in links
        if not (link[0] or "").startswith("data:")
    ]
    assert max(line for line, _ in c_state["positions"]) > 70_000
    assert max(column for _, column in c_state["positions"]) > 70_000
    assert counts[1] == 0 and counts[2] == 2


@needs_c
def test_the_compiled_tables_hash_spreads_values_of_every_length() -> None:
    # the tables' own keyed hash (not SipHash: `_tables_c._hash`): every length's path, a
    # byte changed anywhere changes it, and near-alike URLs (long and short) fill a table's
    # slots (low bits) and checks (high half) as random values would
    hash_bytes = importlib.import_module("crawler.urls._tables_c").hash_bytes
    for n in range(200):
        data = bytes((7 * i + n) % 256 for i in range(n))
        assert hash_bytes(data) == hash_bytes(bytearray(data))
    base = b"http://site.example/std/collections/hash_map/struct.HashMap.html#method.insert"
    changed = {
        hash_bytes(base[:i] + bytes([base[i] ^ 1]) + base[i + 1 :]) for i in range(len(base))
    }
    assert len(changed | {hash_bytes(base)}) == len(base) + 1
    for form in ("http://site.example/p/{}.html", "/{}", "{}"):
        hashes = [hash_bytes(form.format(i).encode()) for i in range(1 << 16)]
        slots = Counter(h & 0xFFFF for h in hashes)
        empty = (1 << 16) - len(slots)  # 65,536 into 65,536: e**-1 of them, sd ~123
        assert 23_100 < empty < 25_100, (form, empty)
        assert max(slots.values()) <= 12
        assert len({h >> 32 for h in hashes}) >= (1 << 16) - 8


def _block_page(n: int, new_from: int) -> bytes:
    """``n`` links around the compiled twin's blocks of 16 (their hashes are made, and the
    tables' slots fetched, a block ahead of its probes): each link's target and raw value
    new from ``new_from`` on, every third one repeating the one before it in the same
    block (added, then found), a slow path's Link (an escape, an entity) and a refused
    ``data:`` link at the positions that end and begin a block."""
    out = []
    for i in range(n):
        if i % 16 in (15, 0) and i:
            out.append(f'<a href="/e%41{i}&amp;x">s</a>' if i % 32 else '<a href="data:,x">d</a>')
        elif i % 3 == 2:
            out.append(f'<a href="/b{new_from + i - 1}">r</a>')
        else:
            out.append(f'<a href="/b{new_from + i}">r</a>')
    return "".join(out).encode()


@needs_c
@pytest.mark.parametrize("size", [1, 15, 16, 17, 31, 32, 33, 1100])
def test_the_twins_agree_around_the_compiled_twins_blocks(size: int) -> None:
    # 1100 new targets and raw values on one page: the tables (1,024 slots, grown at 3/4)
    # grow in the middle of a block, after its slots were fetched ahead
    pages = [
        (SEED + "a", _block_page(size, 0)),
        (SEED + "b", _block_page(size, size // 2)),  # half known, half new
        (SEED + "a", _block_page(size, 0)),  # all known
    ]
    made = [(url, _record(data, url), _py_links(data, url)) for url, data in pages]
    c_state, py_state, counts = _both(made, False)
    assert c_state == py_state
    assert counts == [size] * 3
    assert len(c_state["raws"]) >= min(size, 1000) // 2


@needs_c
def test_the_twins_agree_on_links_given_as_links_at_the_column_limits() -> None:
    # Links (a rendered page's, or a slow path's): 300 tag/attr pairs widen the tag column
    # to 2 bytes, a line past 2**32 and a negative column clamp into 4 bytes.
    links = [make_link(SEED + "a", "a", f"t{i}", "href", i % 2 == 0, 1, 1) for i in range(300)]
    links += [
        make_link(SEED + "b", "b", "a", "href", False, 2**40, -1),
        make_link(SEED + "\u00e9", "\u00e9", "a", "href", False, 3, 2**70),
        make_link(None, "http://[x", "a", "href", False, 4, 4),
        make_link("data:,x", "data:,x", "img", "src", False, 5, 5),
        make_link(SEED + "a#f", "a#f", "a", "href", False, 6, 6),
    ]
    for check_frags in (False, True):
        c_state, py_state, counts = _both(
            [(SEED, links, links), (SEED + "2", links[:3], links[:3]), (SEED + "3", [], [])],
            check_frags,
        )
        assert c_state == py_state
        assert counts == [305, 3, 0]
        assert c_state["_tagattr"][0] == "H" and c_state["_line"][0] == "B"
        assert c_state["positions"][300:302] == [(0xFFFFFFFF, 0), (3, 0xFFFFFFFF)]


@needs_c
def test_the_twins_widen_the_target_and_raw_columns_past_65536_ids() -> None:
    # ids take 2 bytes until one is past 65,535: the page that brings it widens the column
    # (from the extractor's record, and from Links), and what reads the column reads both
    many = "".join(f'<a href="/p{i}">x</a>' for i in range(70_000)).encode()
    pages: list[tuple[str, Any, Any]] = [
        (SEED, _record(b'<a href="/a">a</a><a href="/b">b</a>', SEED),
         _py_links(b'<a href="/a">a</a><a href="/b">b</a>', SEED)),
        (SEED + "many", _record(many, SEED + "many"), _py_links(many, SEED + "many")),
        (SEED + "last", _record(b'<a href="/p69999">z</a>', SEED + "last"),
         _py_links(b'<a href="/p69999">z</a>', SEED + "last")),
    ]  # fmt: skip
    c_state, py_state, counts = _both(pages, False)
    assert c_state == py_state
    assert counts == [2, 70_000, 1]
    assert c_state["_target"][0] == "I" and c_state["_raw"][0] == "I"
    assert c_state["_target"][1][:2] == [0, 1] and c_state["_target"][1][-1] == 70_001
    small, _, _ = _both(pages[:1], False)
    assert small["_target"][0] == "H" and small["_raw"][0] == "H"
    occ = Occurrences()
    occ.add_page(0, [1, 70_000], [1, 1], [1, 1], [("a", "href")] * 2, ["r", "s"], [False] * 2)
    occ.add_page(1, [70_000, 2], [1, 1], [1, 1], [("a", "href")] * 2, ["r", "s"], [True] * 2)
    assert occ._target.typecode == "I"
    wanted = bytearray(70_001)
    wanted[70_000] = 1
    assert list(occ.rows_of(wanted)) == [1, 2]
    nodes_t = [-1] * 70_001
    nodes_t[70_000], nodes_t[2] = 5, 0
    assert _counts(occ, nodes_t, [0, 1], 6, pure=False) == _counts(
        occ, nodes_t, [0, 1], 6, pure=True
    )
    args = (array("i", nodes_t), array("i", [0, 1]), [1], 6)
    assert occ.depths(*args) == occ.depths_py(*args) == array("i", [1, 0, -1, -1, -1, 1, -1])


@needs_c
def test_known_targets_are_found_again_and_the_tables_belong_to_one_interner() -> None:
    # The compiled twin's table of known target keys is a cache of the targets' dict: a
    # known URL is found without target_of, and another targets interner (one that does not
    # know the key) gets tables of its own, never the ids of the first.
    occ = Occurrences()
    t = _Targets(False)
    rec = _record(b'<a href="/k">k</a>', SEED)
    take_c(occ, occ.page_id(SEED), rec, t.interner, t, False)
    take_c(occ, occ.page_id(SEED), rec, t.interner, t, False)
    assert t.calls == [(SEED + "k", "/k")]  # the second time: found, no call
    t2 = _Targets(False)
    t2.interner.id("other")  # (so that the key gets id 1 there)
    take_c(occ, occ.page_id(SEED), rec, t2.interner, t2, False)
    assert t2.calls == [(SEED + "k", "/k")]
    assert occ._target.tolist() == [0, 0, 1]


@needs_c
def test_the_checker_records_the_same_findings_with_either_twin(monkeypatch: Any) -> None:
    rng = random.Random(3)
    pages = [(SEED + f"p{i}", _dense_page(rng, 150) + _ODD.encode()) for i in range(5)]
    states = []
    for twin in ("c", "py"):
        if twin == "py":
            monkeypatch.setattr(occurrences, "_take_c", None)
        f = Findings(CrawlConfig(seeds=(SEED,)).validated(), check_fragments=True)
        for url, data in pages:
            f._take_links(url, _record(data, url) if twin == "c" else _py_links(data, url))
        states.append(
            (
                [f.targets[i] for i in range(len(f.targets))],
                f._kind.tolist(),
                list(f._bases),
                list(f.store.edges()),
                f.stats.links,
                [
                    (o.page, o.line, o.column, o.raw)
                    for g in f.store.select({t: t for t in range(len(f.targets))}).values()
                    for o in g
                ],
            )
        )
    assert states[0] == states[1]


def test_no_extensions_selects_the_pure_twin() -> None:
    code = "from crawler.urls import occurrences as o; print(o.IMPLEMENTATION, o._take_c)"
    env = {**os.environ, "CRAWLER_NO_EXTENSIONS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["py", "None"], out.stderr
    if take_c is not None:
        env.pop("CRAWLER_NO_EXTENSIONS")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.stdout.split()[0] == "c", out.stderr


def test_the_pure_twin_widens_and_interns_as_the_store_did() -> None:
    occ = Occurrences()
    t = _Targets(False)
    links = [make_link(SEED + "a", "a", "a", "href", False, 70_000, 3)]
    assert occ.take_py(occ.page_id(SEED), links * 2, t.interner, t, False) == 2
    # the line a step from the run's previous link: the first past 254 in the side table
    assert occ._line.typecode == "B" and occ._line.tolist() == [0xFF, 0]
    assert occ._line_wide_at.tolist() == [0] and occ._line_wide.tolist() == [70_000]
    assert occ._col.tolist() == [3, 0] and not occ._col_wide_at
    assert occ.position(1) == (70_000, 3) == occ.position(0)
    assert occ._raw == array("I", [0, 0]) and t.calls == [(SEED + "a", "a")]


def test_the_twins_decode_the_same_positions() -> None:
    # runs of random positions (steps forward, back, past the escapes, a page again):
    # decode (compiled) and decode_py give back what went in, for any span of runs
    if occurrences._decode_c is None:
        pytest.skip("the compiled readers are not built")
    rng = random.Random(5)
    occ = Occurrences()
    given: list[tuple[int, int]] = []
    for page in [0, 1, 1, 2, 0, 3, 4]:
        n = rng.randrange(1, 400)
        lines = sorted(rng.choice([rng.randrange(300), rng.randrange(2**33)]) for _ in range(n))
        if page == 2:
            rng.shuffle(lines)  # lines that go back
        cols = [rng.choice([rng.randrange(70), rng.randrange(200_000), -5]) for _ in range(n)]
        occ.add_page(page, [0] * n, lines, cols, [("a", "href")] * n, ["r"] * n, [False] * n)
        given += [(min(li, 2**32 - 1), max(c, 0)) for li, c in zip(lines, cols, strict=True)]
    runs = len(occ._run_start)
    assert runs == 6 and occ._line_wide_at and occ._col_wide_at
    for first in range(runs + 1):
        for last in range(first, runs + 1):
            c_lines, c_cols = occurrences._decode_c(occ, first, last)
            assert (c_lines, c_cols) == occ.decode_py(first, last)
            start = occ._run_start[first] if first < runs else len(occ)
            end = occ._run_start[last] if last < runs else len(occ)
            assert list(zip(c_lines, c_cols, strict=True)) == given[start:end]


@pytest.mark.parametrize("pure", [True, False])
def test_long_lines_keep_line_and_column_narrow_and_read_back_whole(
    pure: bool, tmp_path: Any
) -> None:
    # rustdoc's pages have lines of 200,000 characters and more: a column (step) past
    # 65,534 goes to the side table (its row and value) instead of widening every link's
    # column to 4 bytes, the line is a 1-byte step; select, in memory and on disk (across a
    # batch's flush), gives them back whole.
    from crawler.audit.diskgraph import BATCH_LINKS, DiskOccurrences  # noqa: PLC0415
    from crawler.check.store import OccurrenceStore  # noqa: PLC0415

    if not pure and take_c is None:
        pytest.skip("the compiled twin is not built")
    per_page = 1000
    pages = BATCH_LINKS // per_page + 3  # the disk store flushes a batch in between
    wide = {(p, k): (1 + p, 70_000 + 250 * k) for p in range(pages) for k in (3, 998)}
    wide[(pages - 1, 5)] = (80_000, 12)  # a long page: the line wide, its column not
    stores = [OccurrenceStore(), DiskOccurrences(str(tmp_path / "graph.db"))]
    t = _Targets(False)
    expected = {}
    for store in stores:
        for p in range(pages):
            page = SEED + f"p{p}"
            links = []
            for k in range(per_page):
                line, column = wide.get((p, k), (1 + p, 1 + 60 * k))
                links.append(make_link(f"{SEED}t{k}", f"t{k}", "a", "href", False, line, column))
                expected[(page, f"t{k}", line)] = expected.get((page, f"t{k}", line), column)
            take = store.take_py if pure else store.take
            assert take(store.page_id(page), links, t.interner, t, False) == per_page
    memory = stores[0]
    assert memory._line.typecode == "B" and memory._col.typecode == "H"
    # a wide column and the one back after it (4 a page); the long page's line and the one
    # back after it
    assert len(memory._col_wide_at) == 4 * pages and len(memory._line_wide_at) == 2
    assert memory.nbytes() < len(memory) * 9 + 4 * pages * 12 + 16 * pages + 4096
    assert memory.position(999) == (1, 60 * 999 + 1)
    assert memory.position(998) == (1, 70_000 + 250 * 998)
    tids = {tid: tid for tid in range(len(t.interner))}
    for store in stores:
        got = [(o.page, o.raw, o.line, o.column) for g in store.select(tids).values() for o in g]
        assert sorted(got) == sorted((p, r, li, c) for (p, r, li), c in expected.items())
        assert (SEED + "p0", "t3", 1, 70_750) in got and (SEED + f"p{pages - 1}", "t5",
                                                          80_000, 12) in got  # fmt: skip
    stores[1].close()


# -- the columns read back: rows_of, walk, depths (the audit's report) --


def _graph(occ: Occurrences, runs: list[tuple[int, list[int], list[int]]]) -> None:
    """Runs of (page, targets, nofollow flags) into ``occ`` (a page may come back later)."""
    for page, tids, nofollow in runs:
        n = len(tids)
        occ.add_page(page, tids, [1] * n, [1] * n, [("a", "href")] * n, ["r"] * n,
                     [bool(f) for f in nofollow])  # fmt: skip


def _counts(occ: Occurrences, node_of_tid: list[int], node_of_page: list[int], size: int,
            pure: bool) -> tuple[Any, ...]:  # fmt: skip
    linked = bytearray(len(node_of_tid))
    outs, ins, fol = (array("I", [0]) * (size + 1) for _ in range(3))
    walk = occ.walk_py if pure else occ.walk
    edges = walk(array("i", node_of_tid), array("i", node_of_page), linked, outs, ins, fol)
    return edges, bytes(linked), outs.tolist(), ins.tolist(), fol.tolist()


def test_walk_and_depths_count_a_small_graph() -> None:
    # pages 0..2 are nodes 0..2; targets 0..2 end at nodes 0..2, target 3 at none (-1)
    occ = Occurrences()
    _graph(occ, [(0, [1, 1, 2, 3, 0], [0, 0, 1, 0, 0]), (1, [2, 2], [1, 1]), (2, [], []),
                 (2, [0], [0])])  # fmt: skip
    nodes_t, nodes_p = [0, 1, 2, -1], [0, 1, 2]
    edges, linked, outs, ins, fol = _counts(occ, nodes_t, nodes_p, 3, pure=False)
    assert edges == 4 + 1 + 1  # distinct targets of each run
    assert linked == b"\1\1\1\1"
    assert outs == [4, 1, 1, 0]
    assert ins == [1, 1, 2, 1]  # its own link does not count for page 0; -1 in the last
    assert fol == [1, 1, 0, 1]  # node 2 is linked with nofollow only
    depth = occ.depths(array("i", nodes_t), array("i", nodes_p), [1], 3)
    assert depth.tolist() == [2, 0, 1, -1]  # from 1: 2 (one click), then 0 (2's second run)
    depth = occ.depths(array("i", nodes_t), array("i", nodes_p), [0], 3)
    assert depth.tolist() == [0, 1, 1, -1]
    assert list(occ.rows_of(bytearray(b"\0\0\1"))) == [2, 5, 6]
    assert list(occ.rows_of(bytearray(b"\0\0\0\1"))) == [3]


@needs_c
def test_the_twins_walk_the_same_graph() -> None:
    rng = random.Random(11)
    for _ in range(20):
        ntargets, npages, size = rng.randint(1, 60), rng.randint(1, 30), rng.randint(1, 40)
        occ = Occurrences()
        runs = []
        for _ in range(rng.randint(0, 50)):
            n = rng.randint(0, 30)
            runs.append((rng.randrange(npages), [rng.randrange(ntargets) for _ in range(n)],
                         [rng.random() < 0.3 for _ in range(n)]))  # fmt: skip
        _graph(occ, runs)
        nodes_t = [rng.randrange(-1, size) for _ in range(ntargets)]
        nodes_p = [rng.randrange(-1, size) for _ in range(npages)]
        assert _counts(occ, nodes_t, nodes_p, size, pure=False) == _counts(
            occ, nodes_t, nodes_p, size, pure=True
        )
        seeds = [rng.randrange(-1, size + 1) for _ in range(rng.randint(0, 3))]
        args = (array("i", nodes_t), array("i", nodes_p), seeds, size)
        assert occ.depths(*args) == occ.depths_py(*args)
        wanted = bytearray(rng.random() < 0.2 for _ in range(rng.randint(0, ntargets + 2)))
        picked = [i for i, t in enumerate(occ._target) if t < len(wanted) and wanted[t]]
        assert list(occ.rows_of(wanted)) == picked
        assert list(occurrences._rows_of_c(occ, wanted)) == picked


# -- the raw values' interner --


def test_texts_and_the_interner_give_the_same_ids_and_strings() -> None:
    texts_c = occurrences._texts_c
    if texts_c is None:
        pytest.skip("the compiled twins are not built")
    rng = random.Random(5)
    words = ["", "a", "../x.html#m", "caf\u00e9", "\ud800lone", "\x00nul", "v" * 70_000]
    words += ["/p/" + "".join(rng.choice("abc/#%") for _ in range(rng.randint(0, 12)))
              for _ in range(5000)]  # fmt: skip
    texts, interner = texts_c(), Interner()
    for word in words + words[::3]:
        assert texts.id(word) == interner.id(word)
    assert len(texts) == len(interner) > 1000
    assert [texts[i] for i in range(len(texts))] == [interner[i] for i in range(len(interner))]
    assert texts.get("never seen") is None and texts.get("caf\u00e9") == interner.get("caf\u00e9")
    assert len(texts) == len(interner)  # get adds nothing
    with pytest.raises(IndexError):
        texts[len(texts)]
    assert texts[-1] == interner[len(interner) - 1]


def test_texts_hold_about_half_the_bytes_of_an_interner() -> None:
    texts_c = occurrences._texts_c
    if texts_c is None:
        pytest.skip("the compiled twins are not built")
    n = 100_000
    held = []
    for make in (Interner, texts_c):
        tracemalloc.start()
        try:
            table = make()
            for i in range(n):  # each value made as take makes it: a str of the page's bytes
                table.id(f"../../std/collections/struct.Map{i}.html")
            held.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
        del table
    interner, texts = held
    assert texts < interner / 1.6, (interner, texts)
    assert texts / n < 100  # 40 bytes of text, an end offset and a slot or two
