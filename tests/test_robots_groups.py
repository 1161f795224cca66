"""Which robots.txt groups apply, through a real crawl: RFC 9309 section 2.2.1 and Google's parser.

Each case serves a robots.txt and a set of pages on 127.0.0.1, crawls every page as a seed and
asserts which pages the server saw requested. The cases follow the RFC's example (section 5.1)
and the kinds of case in google/robotstxt's tests (grouping, product-token matching, case,
unknown lines), written for this crawler's token ``crawler``.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter

import pytest
from aiohttp import web

from crawler.config import DEFAULT_USER_AGENT, ConfigError, from_mapping
from crawler.core.engine import crawl
from crawler.core.robots import RobotsRules, product_token

#: The User-Agent header before issue 25: words in it picked groups.
OLD_HEADER = "crawler/0.1.0 (link discovery bot; python-aiohttp)"
PAGES = ("/", "/a", "/b/x", "/l", "/p", "/star", "/private/x", "/public", "/x/1", "/y/1")


async def fetched(serve, robots: str, paths=PAGES, **options) -> set[str]:  # type: ignore[no-untyped-def]
    """Crawl every path as a seed against a server serving ``robots``; the paths it fetched."""
    hits: Counter[str] = Counter()

    async def page(request: web.Request) -> web.Response:
        hits[request.path] += 1
        if request.path == "/robots.txt":
            return web.Response(text=robots)
        return web.Response(text="<p>page</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    server = await serve(app)
    seeds = [str(server.make_url(p)) for p in paths]
    await crawl(seeds, max_depth=0, retries=0, **options)
    assert hits["/robots.txt"] == 1
    return {p for p in hits if p != "/robots.txt"}


def everything_but(*paths: str) -> set[str]:
    return set(PAGES) - set(paths)


async def test_the_whole_header_does_not_pick_groups(serve) -> None:  # type: ignore[no-untyped-def]
    """Words of the header other than its product token (``bot``, ``link``, ``python``) name
    no group; a longer name matching the header does not beat the token's own group."""
    robots = """\
User-agent: python-aiohttp
Disallow: /

User-agent: crawler
Allow: /
Disallow: /star
"""
    for header in (OLD_HEADER, DEFAULT_USER_AGENT):
        assert await fetched(serve, robots, user_agent=header) == everything_but("/star")
    robots = """\
User-agent: bot
Disallow: /b

User-agent: link
Disallow: /l

User-agent: python
Disallow: /p

User-agent: *
Disallow: /star
"""
    got = await fetched(serve, robots, user_agent=OLD_HEADER)
    assert got == everything_but("/star")


async def test_the_default_header_is_honest_and_its_token_is_crawler(serve) -> None:  # type: ignore[no-untyped-def]
    assert DEFAULT_USER_AGENT.startswith("crawler/")
    assert not any(w in DEFAULT_USER_AGENT.lower() for w in ("aiohttp", "python", "bot;"))
    robots = "User-agent: *\nDisallow: /\n\nUser-agent: CRAWLER\nDisallow: /private\n"
    assert await fetched(serve, robots) == everything_but("/private/x")


@pytest.mark.parametrize(
    ("robots", "blocked"),
    [
        # A prefix of the token is another crawler's name (Google compares for equality).
        (
            "User-agent: crawl\nDisallow: /\n\nUser-agent: crawlerx\nDisallow: /\n\n"
            "User-agent: *\nDisallow: /star\n",
            {"/star"},
        ),
        # A name is read up to its first character not a letter, "_" or "-".
        ("User-agent: Crawler/2.0\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n", {"/a"}),
        ("User-agent: crawler bot\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n", {"/a"}),
        # "*" followed by a blank and more is still the "*" group; "*crawler" names nobody.
        ("User-agent: *crawler\nDisallow: /\n\nUser-agent: * all\nDisallow: /star\n", {"/star"}),
    ],
    ids=["prefix", "version", "words", "star"],
)
async def test_a_group_names_the_token_exactly(serve, robots: str, blocked: set[str]) -> None:  # type: ignore[no-untyped-def]
    assert await fetched(serve, robots) == everything_but(*blocked)


@pytest.mark.parametrize(
    "between",
    [
        "Invalid-Unknown-Line: x",
        "Crawl-delay: 0.01",
        "Sitemap: http://127.0.0.1/s.xml\nFoo\nRequest-rate: 1/5",
    ],
    ids=["unknown", "crawl-delay", "others"],
)
async def test_only_a_rule_ends_a_run_of_user_agent_lines(serve, between: str) -> None:  # type: ignore[no-untyped-def]
    """``User-agent: crawler``, another line, ``User-agent: *``, ``Disallow: /``: one group."""
    robots = f"User-agent: crawler\n{between}\nUser-agent: *\nDisallow: /\n"
    assert await fetched(serve, robots) == set()
    # The crawl-delay of the group is the crawler's (read from the group the token is in).
    rules = RobotsRules.parse(f"User-agent: crawler\n{between}\nUser-agent: o\nAllow: /\n", "x")
    assert rules.crawl_delay is None
    rules = RobotsRules.parse(
        f"User-agent: other\n{between}\nUser-agent: crawler\nAllow: /\n", "crawler"
    )
    assert rules.crawl_delay == (0.01 if between.startswith("Crawl") else None)


async def test_groups_naming_the_token_are_merged_and_orphans_ignored(serve) -> None:  # type: ignore[no-untyped-def]
    robots = """\
allow: /a
# a rule before any user-agent line belongs to no group

user-agent: crawler
disallow: /
allow: /x/
user-agent: otherbot
disallow: /
allow: /y/


allow: /l
user-agent: thirdbot

user-agent: crawler
allow: /public
disallow: /
"""
    assert await fetched(serve, robots) == {"/x/1", "/public"}
    # thirdbot shares the last group; otherbot's group goes on past the blank lines.
    assert await fetched(serve, robots, robots_agent="thirdbot") == {"/public"}
    assert await fetched(serve, robots, robots_agent="otherbot") == {"/y/1", "/l"}


async def test_a_group_naming_the_token_without_rules_allows_all(serve) -> None:  # type: ignore[no-untyped-def]
    robots = "User-agent: *\nDisallow: /\n\nUser-agent: other\nUser-agent: Crawler/9\n"
    assert await fetched(serve, robots, user_agent=OLD_HEADER) == set(PAGES)


RFC_EXAMPLE = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""
RFC_PAGES = (
    "/",
    "/example/page.html",
    "/example/allowed.gif",
    "/example/other",
    "/publications/x",
    "/img.gif",
)


@pytest.mark.parametrize(
    ("agent", "allowed"),
    [
        ("FooBot", {"/example/page.html", "/example/allowed.gif"}),
        ("barbot", set(RFC_PAGES) - {"/example/page.html"}),
        ("BAZBOT", set(RFC_PAGES) - {"/example/page.html"}),
        ("quxbot", set(RFC_PAGES)),
        ("crawler", {"/", "/publications/x"}),
    ],
)
async def test_rfc_9309_example(serve, agent: str, allowed: set[str]) -> None:  # type: ignore[no-untyped-def]
    """RFC 9309 section 5.1, by ``--robots-agent`` (the User-Agent header names no bot)."""
    got = await fetched(serve, RFC_EXAMPLE, RFC_PAGES, robots_agent=agent, user_agent=OLD_HEADER)
    assert got == allowed


async def test_robots_agent_for_a_header_that_starts_with_another_token(serve) -> None:  # type: ignore[no-untyped-def]
    header = "Mozilla/5.0 (compatible; MyBot/1.0; +http://127.0.0.1/bot)"
    robots = "User-agent: mybot\nDisallow: /private\n\nUser-agent: Mozilla\nDisallow: /\n"
    assert await fetched(serve, robots, user_agent=header) == set()  # the token is Mozilla
    got = await fetched(serve, robots, user_agent=header, robots_agent="MyBot")
    assert got == everything_but("/private/x")


def test_product_token() -> None:
    assert product_token(DEFAULT_USER_AGENT) == "crawler"
    assert product_token(" Foo_Bar-baz/1 (x)") == "foo_bar-baz"
    assert product_token("1crawler") == ""


@pytest.mark.parametrize("bad", ["My Bot", "bot/1.0", "", "bot2"])
def test_robots_agent_must_be_a_product_token(bad: str) -> None:
    with pytest.raises(ConfigError, match="robots_agent: must be a product token"):
        from_mapping({"robots_agent": bad})


async def test_robots_agent_flag_of_crawl_and_check(serve, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--robots-agent`` on the command line, for ``crawl`` and for ``check``."""
    hits: Counter[str] = Counter()

    async def page(request: web.Request) -> web.Response:
        hits[request.path] += 1
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: otherbot\nDisallow: /private\n")
        if request.path == "/":
            return web.Response(text='<a href="/private/x">p</a>', content_type="text/html")
        return web.Response(text="<p>page</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    server = await serve(app)
    for command in ("crawl", "check"):
        hits.clear()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawler", command, str(server.make_url("/")),
            "--robots-agent", "OtherBot", "--retries", "0", "-q",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode in (0, 1), err.decode()
        assert hits["/"] == 1 and hits["/private/x"] == 0, (command, dict(hits), err.decode())
        hits.clear()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawler", command, str(server.make_url("/")),
            "--retries", "0", "-q",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
        )  # fmt: skip
        await asyncio.wait_for(proc.communicate(), 60)
        assert hits["/private/x"] >= 1, (command, dict(hits))
