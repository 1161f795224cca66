"""The checker's per-page link bookkeeping (``Findings._take_links``): its fast path for a
URL already known as a target must give the targets the long way gives."""

from __future__ import annotations

from crawler.check.findings import Findings
from crawler.config import CrawlConfig
from crawler.extract._link import make_link


def _findings() -> Findings:
    return Findings(CrawlConfig(seeds=("http://127.0.0.1:9/",)).validated(), check_fragments=True)


def test_a_url_equal_to_a_key_that_is_not_canonical_is_canonicalised() -> None:
    # "%%341" canonicalises to "%41" (the "%34" decoded to "4"), which is not canonical
    # itself ("%41" is "A"): a later link to ".../%41" must reach the target ".../A", not
    # the key ".../%41" the first link made.
    f = _findings()
    first = make_link("http://127.0.0.1:9/%%341", "/%%341", "a", "href", False, 1, 1)
    second = make_link("http://127.0.0.1:9/%41", "/%41", "a", "href", False, 2, 1)
    f._take_links("http://127.0.0.1:9/", [first, second])
    keys = [f.targets[i] for i in range(len(f.targets))]
    assert keys == ["http://127.0.0.1:9/%41", "http://127.0.0.1:9/A"]
    pages, tids = zip(*[(p, t) for p, t, _, _ in f.store.edges()], strict=True)
    assert tids == (0, 1)


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
