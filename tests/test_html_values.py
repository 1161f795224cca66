"""The value parsers of _html.py (srcset, meta refresh): the standard's results, never a raise.

A value comes straight from a hostile page; an exception in one of these parsers would end the
extraction of the rest of the page, so every input must give a result.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.extract._html import parse_srcset, refresh_url
from tests.extract_common import BASE, IMPL_NAMES, IMPLS

HUGE = "1" + "0" * 5000  # more digits than int() converts (sys.get_int_max_str_digits)


def _short(value: object) -> str:
    """Test ids: the values hold thousands of digits."""
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)})"


@pytest.mark.parametrize(
    ("value", "urls"),
    [
        # Width and height are valid non-negative integers of any size; zero is an error.
        (f"a.png {HUGE}w", ["a.png"]),
        (f"a.png {'9' * 5000}w, b.png 2w", ["a.png", "b.png"]),
        (f"a.png {'0' * 5000}w, b.png", ["b.png"]),
        (f"a.png 100w {HUGE}h", ["a.png"]),
        (f"a.png 100w {'0' * 5000}h", []),
        ("a.png 0w", []),
        ("a.png 00w", []),
        ("a.png 007w", ["a.png"]),
        ("a.png -1w", []),
        ("a.png +1w", []),
        ("a.png 1.5w", []),
        # Density: a valid floating-point number, not negative; one that rounds to 2^1024 (too
        # large for a double) is an error in the standard's parser.
        ("a.png 1e999x", []),
        (f"a.png {HUGE}x", []),
        (f"a.png {HUGE}e-5000x", ["a.png"]),  # 1, however many digits spell it
        ("a.png 1.7976931348623157e308x", ["a.png"]),  # the largest double
        ("a.png 1.8e308x", []),
        ("a.png 1e-999x", ["a.png"]),  # rounds to 0, which is not negative
        ("a.png -0x", ["a.png"]),
        ("a.png -0.0e5x", ["a.png"]),
        ("a.png -1x", []),
        ("a.png -1e-999x", ["a.png"]),  # rounds to 0 too
        ("a.png 1e99999999999999999999x", []),
        ("a.png nanx", []),
        ("a.png NaNx", []),
        ("a.png infx", []),
        ("a.png infinityx", []),
        ("a.png 1.x", []),
        ("a.png .5x", ["a.png"]),
        ("a.png 1e5x", ["a.png"]),
        ("a.png 1E+5x", ["a.png"]),
        ("a.png ٣x", []),  # only ASCII digits count
        ("a.png ٣w", []),
        ("a.png 1_000w", []),
        ("a.png 1X", []),
        # The rest of the value is still parsed after an invalid candidate.
        (f"a.png {HUGE}e999x, b.png 2x, c.png", ["b.png", "c.png"]),
    ],
    ids=_short,
)
def test_parse_srcset_numbers(value: str, urls: list[str]) -> None:
    assert parse_srcset(value) == urls


@pytest.mark.parametrize(
    ("content", "url"),
    [
        ("0; url=/a", "/a"),
        ("0;URL = '/a'b", "/a"),
        ('0, url="/a', "/a"),
        ("0 /a", "/a"),
        ("0.5.5; /a", "/a"),
        (".5;/a", "/a"),
        ("0", None),
        ("0;", None),
        ("0; ", None),
        ("x; url=/a", None),
        ("0x; url=/a", None),
        ("", None),
        # "url" not followed by "=", or a prefix of it: the URL is the text from the "u"
        # (the standard jumps to "parse" with the urlString taken before the "url").
        ("0; url /a", "url /a"),
        ("0; uri=/a", "uri=/a"),
        ("0; ufoo", "ufoo"),
        ("0; u", "u"),
        ("0; ur", "ur"),
        ("0; url", "url"),
        ("0; url ", "url "),
        ("0; url='a", "a"),
        ("0; 'a' b", "a"),
        (f"{HUGE}; url=/a", "/a"),  # the time is any number of digits
    ],
    ids=_short,
)
def test_refresh_url(content: str, url: str | None) -> None:
    assert refresh_url(content) == url


_VALUE_CHARS = st.sampled_from(list("0123456789.,;=-+eExXwWhHuUrRlL \t\n()'\"/a\u0663"))
_VALUES = st.one_of(st.text(), st.text(_VALUE_CHARS), st.text(_VALUE_CHARS, min_size=200))


@given(_VALUES)
def test_parse_srcset_never_raises(value: str) -> None:
    urls = parse_srcset(value)
    assert all(url and isinstance(url, str) for url in urls)
    assert all(url in value for url in urls)


@given(_VALUES)
def test_refresh_url_never_raises(content: str) -> None:
    url = refresh_url(content)
    assert url is None or url in content


@given(st.integers(min_value=0, max_value=20_000), st.sampled_from("wxh"))
def test_parse_srcset_any_length_of_digits(digits: int, kind: str) -> None:
    num = "1" * digits if digits else "0"
    value = f"a.png {num}{kind}, b.png"
    # 0w is an error, 0x is not; h needs a w; 310 digits are more than a double holds.
    bad = kind == "h" or (kind == "w" and digits == 0) or (kind == "x" and digits > 309)
    assert parse_srcset(value) == (["b.png"] if bad else ["a.png", "b.png"])


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_huge_srcset_descriptor_does_not_end_the_page(impl: str) -> None:
    """Through both extractors: the links after the bad value are still found."""
    page = f"<img srcset='a.png {HUGE}w, b.png {HUGE}x'><a href=/after>x</a><img srcset='c.png 2x'>"
    ex: Any = IMPLS[impl](BASE, "utf-8", link_set="resources")
    urls = [link.url for link in ex.feed(page.encode()) + ex.close()]
    assert urls == [
        "https://example.org/dir/a.png",
        "https://example.org/after",
        "https://example.org/dir/c.png",
    ]
