"""The checker's per-page link bookkeeping (``Findings._take_links``): its fast path for a
URL already known as a target must give the targets the long way gives."""

from __future__ import annotations

import random

from crawler.check.findings import Findings
from crawler.check.model import Occurrence
from crawler.check.store import OccurrenceStore
from crawler.config import CrawlConfig
from crawler.extract._link import make_link


def _findings() -> Findings:
    return Findings(CrawlConfig(seeds=("http://127.0.0.1:9/",)).validated(), check_fragments=True)


def test_a_stray_percent_keeps_its_escapes_and_each_link_its_target() -> None:
    # "%%341" once canonicalised to "%41" (the "%34" decoded to "4"), a key that was not
    # canonical itself ("%41" is "A"). Where a '%' stands alone the escapes are now only
    # upper-cased, so the key is "%%341", and a later link to ".../%41" reaches ".../A".
    f = _findings()
    first = make_link("http://127.0.0.1:9/%%341", "/%%341", "a", "href", False, 1, 1)
    second = make_link("http://127.0.0.1:9/%41", "/%41", "a", "href", False, 2, 1)
    f._take_links("http://127.0.0.1:9/", [first, second])
    keys = [f.targets[i] for i in range(len(f.targets))]
    assert keys == ["http://127.0.0.1:9/%%341", "http://127.0.0.1:9/A"]
    assert [t for _, t, _, _ in f.store.edges()] == [0, 1]


def test_known_urls_fragments_and_schemes_keep_their_targets_and_occurrences() -> None:
    f = _findings()
    page = "http://127.0.0.1:9/p"
    links = [
        make_link("http://127.0.0.1:9/a", "a", "a", "href", False, 3, 5),
        make_link("http://127.0.0.1:9/a", "a#x", "a", "href", True, 4, 6),
        make_link("http://127.0.0.1:9/a", "/a", "img", "src", False, 5, 7),
        make_link(None, "http://a b/", "a", "href", False, 6, 8),
        make_link("mailto:x@y", "mailto:x@y", "a", "href", False, 7, 9),
        make_link("data:,x", "data:,x", "img", "src", False, 8, 1),
    ]
    f._take_links(page, links)
    f._take_links(page + "2", links[:3])
    keys = [f.targets[i] for i in range(len(f.targets))]
    assert keys == [
        "http://127.0.0.1:9/a",
        "http://127.0.0.1:9/a#x",
        "\0ihttp://a b/",
        "\0smailto:x@y",
    ]
    edges = [(p, t, f.store.tag_attr(ta), nf) for p, t, ta, nf in f.store.edges()]
    assert edges == [
        (0, 0, ("a", "href"), False),
        (0, 1, ("a", "href"), True),
        (0, 0, ("img", "src"), False),
        (0, 2, ("a", "href"), False),
        (0, 3, ("a", "href"), False),
        (1, 0, ("a", "href"), False),
        (1, 1, ("a", "href"), True),
        (1, 0, ("img", "src"), False),
    ]
    found = f.store.select({1: 0, 3: 1})
    assert [(o.page, o.line, o.column, o.raw) for o in found[0]] == [
        (page, 4, 6, "a#x"),
        (page + "2", 4, 6, "a#x"),
    ]
    assert [(o.tag, o.attr, o.raw) for o in found[1]] == [("a", "href", "mailto:x@y")]
    assert f.stats.links == 9


def test_the_store_widens_a_column_a_value_needs_and_clamps_what_no_width_holds() -> None:
    store = OccurrenceStore()
    a, b = store.page_id("http://h/a"), store.page_id("http://h/b")
    store.add_page(a, [0, 1], [1, 2], [3, 4], [("a", "href")] * 2, ["x", "y"], [False, True])
    # a line past 65,535, a column past 2**32 and a negative one, 300 tag/attr pairs
    big = [70_000, 5, 6]
    cols = [2**40, -1, 9]
    pairs = [("a", "href"), ("t299", "x"), ("b", "src")]
    store.add_page(b, [2, 0, 1], big, cols, pairs, ["z", "x", "y"], [True, False, False])
    for i in range(300):
        store.add(3, b, 1, 1, f"t{i}", "x", "w")
    assert len(store) == 305
    found = store.select({0: 0, 2: 1, 1: 2})
    assert [(o.page, o.line, o.column, o.raw) for o in found[0]] == [
        ("http://h/a", 1, 3, "x"),
        ("http://h/b", 5, 0, "x"),
    ]
    assert [(o.line, o.column, o.tag, o.attr) for o in found[1]] == [
        (70_000, 0xFFFFFFFF, "a", "href")
    ]
    assert [(o.page, o.line, o.column, o.tag) for o in found[2]] == [
        ("http://h/a", 2, 4, "a"),
        ("http://h/b", 6, 9, "b"),
    ]
    edges = list(store.edges())
    assert [(p, t, nf) for p, t, _, nf in edges[:5]] == [
        (a, 0, False),
        (a, 1, True),
        (b, 2, True),
        (b, 0, False),
        (b, 1, False),
    ]
    assert [store.tag_attr(ta) for _, _, ta, _ in edges[-2:]] == [("t298", "x"), ("t299", "x")]
    assert store.nbytes() < 305 * 25


def test_select_gives_each_groups_occurrences_in_crawl_order() -> None:
    # select skips the other targets' occurrences in C and finds each one's page from the
    # runs: the same lists as a plain reading of every occurrence (pages in several runs,
    # pages with no links, targets in no group, groups of several targets).
    rng = random.Random(1)
    store = OccurrenceStore()
    every: list[tuple[str, int, int, int, str, str, bool]] = []
    for _ in range(300):
        page = store.page_id(f"http://h/p{rng.randrange(50)}")
        rows = [
            (rng.randrange(200), rng.randrange(1, 99), rng.randrange(1, 99),
             rng.choice(["a", "img"]), f"r{rng.randrange(30)}", rng.random() < 0.1)
            for _ in range(rng.choice([0, 1, 5, 40]))
        ]  # fmt: skip
        store.add_page(page, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                       [(r[3], "href") for r in rows], [r[4] for r in rows],
                       [r[5] for r in rows])  # fmt: skip
        every += [(store.pages[page], *r) for r in rows]
    for _ in range(50):
        groups = {t: rng.randrange(5) for t in rng.sample(range(250), rng.randrange(0, 60))}
        expected: dict[int, list[Occurrence]] = {g: [] for g in groups.values()}
        for page_url, target, line, col, tag, raw, _nf in every:
            if target in groups:
                expected[groups[target]].append(Occurrence(page_url, line, col, tag, "href", raw))
        assert store.select(groups) == expected
