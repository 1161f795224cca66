"""``--render-sample`` without a browser: which pages the auto rule's "no" renders all the same.

The choice is the crawl state's fingerprint of the URL (keyed and stored with a persistent
state), so it is the same for a URL in every run of a crawl, a resumed one too, and the
fraction sampled is the rate asked for.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from crawler.config import CrawlConfig
from crawler.core.render_rule import MANY_LINKS
from crawler.core.rendering import RenderStep
from crawler.core.results import CrawlStats, PageResult
from crawler.urls.fingerprint import Fingerprinter, new_key

URLS = [f"https://docs.example.org/section/{i}/page-{i * 7}.html" for i in range(6000)]
STATIC = [b"<!doctype html><title>t</title><body>" + b'<a href="/x">x</a>' * 30 + b"</body>"]
SHELL = [
    b'<!doctype html><html><head><script src="/app.js"></script></head>'
    b'<body><a href="/a">a</a><div id="root"></div></body></html>'
]


def step(rate: float, key: bytes, render: str = "auto") -> RenderStep:
    config = CrawlConfig(render=render, render_sample=rate).validated()  # type: ignore[arg-type]
    fingerprint = Fingerprinter(key)
    gate: Any = None  # (the gate is not asked: nothing is rendered here)
    return RenderStep(config, gate, CrawlStats(), fingerprint)


def test_the_same_urls_are_sampled_in_every_run_of_a_crawl() -> None:
    key = new_key()
    first = {u for u in URLS if step(0.2, key).sampled(u)}
    resumed = {u for u in URLS if step(0.2, key).sampled(u)}  # a new process, the stored key
    assert first == resumed
    other_crawl = {u for u in URLS if step(0.2, new_key()).sampled(u)}
    assert other_crawl != first  # keyed: another crawl draws its own sample


@pytest.mark.parametrize("rate", [0.05, 0.2, 0.5])
def test_the_fraction_sampled_is_the_rate(rate: float) -> None:
    s = step(rate, new_key())
    share = sum(s.sampled(u) for u in URLS) / len(URLS)
    assert abs(share - rate) < 0.03, share  # 6,000 draws: 3 sigma is under 0.02


def test_rate_zero_and_one() -> None:
    assert not any(step(0.0, new_key()).sampled(u) for u in URLS)
    assert all(step(1.0, new_key()).sampled(u) for u in URLS)


def test_a_sampled_page_the_rule_would_not_render_is_rendered_as_sample() -> None:
    s = step(0.3, new_key())
    yes = next(u for u in URLS if s.sampled(u))
    no = next(u for u in URLS if not s.sampled(u))
    page = PageResult(url=yes, depth=0)
    assert s.decide(page, list(STATIC), 30, yes) == "sample"
    assert page.render_reason == "sample"
    assert s.decide(PageResult(url=no, depth=0), list(STATIC), 30, no) is None
    # the rule's own reasons come first: a shell is rendered for its reason, sampled or not
    assert s.decide(PageResult(url=yes, depth=0), list(SHELL), 1, yes) == "mount_point"
    # the body of a sampled page is kept whatever its links; another's up to MANY_LINKS
    assert s.keep_below_for(yes) == sys.maxsize
    assert s.keep_below_for(no) == MANY_LINKS


def test_no_sample_without_auto_or_without_a_rate() -> None:
    key = new_key()
    always = step(0.5, key, render="always")
    assert not any(always.sampled(u) for u in URLS[:500])
    assert always.decide(PageResult(url=URLS[0], depth=0), list(STATIC), 30, URLS[0]) == "always"
    off = step(0.0, key)
    assert all(
        off.decide(PageResult(url=u, depth=0), list(STATIC), 30, u) is None for u in URLS[:500]
    )
