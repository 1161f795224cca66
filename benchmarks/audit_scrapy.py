#!/usr/bin/env python3
"""The peer for ``benchmarks/audit_peers.py``: a site audit as a Scrapy user would write it, a
link-graph spider and pipeline, then the audit's rules run over the graph it recorded.

    python benchmarks/audit_scrapy.py URL --concurrency 16 --out findings.json

Issue 26 asks for a comparison with an open-source audit crawler that installs here, or else
"Scrapy with a link-graph pipeline". SEOnaut (Go, MySQL) and LibreCrawl (a Flask app, not on
PyPI) cannot be installed on this machine (no network but the package registries), so this is
the Scrapy one. It is written independently of ``crawler.audit`` (no import of it): the
spider records every response (status, its redirect ``Location``, the ``<a>``/``<area>`` links
from Scrapy's ``LinkExtractor`` with their nofollow, the ``<link rel=canonical>`` and the
``Link`` header's canonical, the ``hreflang`` alternates, ``<meta name=robots>`` noindex), the
sitemaps named by robots.txt, and follows same-host links, redirects (one request a hop:
Scrapy's ``RedirectMiddleware`` is off so that every hop is seen), canonical and hreflang
targets; robots.txt obeyed (Scrapy's Protego middleware). The graph is kept in memory, as
such a pipeline keeps it, and the rules of ``crawler audit`` (docs in the README's audit
section) are applied to it at the end. Prints one JSON line: pages, seconds, and the findings
as {kind: [URLs]}; ``--out`` writes the same to a file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import scrapy
from protego import Protego
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor

sys.path.insert(0, str(Path(__file__).resolve().parent / "crawl"))
from scrapy_spider import bench_settings  # noqa: E402  (the crawl benchmark's Scrapy settings)

_LOC = re.compile(r"<loc>\s*([^<\s]+)\s*</loc>")
_XLINK = re.compile(r"<xhtml:link\b([^>]*)/?>")
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_LINK_HEADER = re.compile(r"<([^>]*)>([^,]*)")


def _url(base: str, href: str) -> str | None:
    try:
        url = urldefrag(urljoin(base, href.strip()))[0]
    except ValueError:
        return None
    return url if url.startswith(("http://", "https://")) else None


class GraphSpider(scrapy.Spider):
    """Record the site's graph: one dict a response in ``self.nodes``."""

    name = "auditgraph"

    def __init__(self, start: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed = start
        self.host = urlsplit(start).netloc
        self.links = LinkExtractor(unique=True)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.sitemap: dict[str, list[tuple[str, str]]] = {}  # loc -> its xhtml:link alternates
        self.robots = ""

    def in_scope(self, url: str) -> bool:
        return urlsplit(url).netloc == self.host

    async def start(self) -> Any:  # type: ignore[override]
        robots = urljoin(self.seed, "/robots.txt")
        yield scrapy.Request(robots, callback=self.parse_robots, dont_filter=True)
        yield scrapy.Request(self.seed, callback=self.parse)

    def parse_robots(self, response: Response) -> Iterator[scrapy.Request]:
        if response.status == 200:
            self.robots = response.text
            for line in self.robots.splitlines():
                key, _, value = line.partition(":")
                if key.strip().lower() == "sitemap" and value.strip():
                    yield scrapy.Request(value.strip(), callback=self.parse_sitemap)

    def parse_sitemap(self, response: Response) -> Iterator[scrapy.Request]:
        text = response.text if isinstance(response, TextResponse) else response.body.decode()
        index = "<sitemapindex" in text
        for block in re.split(r"</(?:url|sitemap)>", text):
            m = _LOC.search(block)
            if not m:
                continue
            loc = m.group(1)
            if index:
                yield scrapy.Request(loc, callback=self.parse_sitemap)
                continue
            alts = []
            for x in _XLINK.finditer(block):
                attrs = dict(_ATTR.findall(x.group(1)))
                if attrs.get("rel") == "alternate" and "hreflang" in attrs:
                    alts.append((attrs["hreflang"], attrs.get("href", "")))
            self.sitemap[loc] = alts
            if self.in_scope(loc):
                yield scrapy.Request(loc, callback=self.parse)

    def parse(self, response: Response) -> Iterator[scrapy.Request]:
        url = response.url
        node: dict[str, Any] = {"status": response.status, "links": [], "alternates": []}
        self.nodes[url] = node
        follow: list[str] = []
        if 300 <= response.status < 400:
            location = response.headers.get("Location")
            target = _url(url, location.decode("latin-1")) if location else None
            node["location"] = target
            if target:
                follow.append(target)
        elif response.status == 200 and isinstance(response, TextResponse):
            for link in self.links.extract_links(response):
                target = urldefrag(link.url)[0]
                node["links"].append((target, link.nofollow))
                follow.append(target)
            head = response.xpath("//head")
            lower = "translate(normalize-space(@rel), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', '{}')".format(
                "abcdefghijklmnopqrstuvwxyz"
            )
            rel = f"contains(concat(' ', {lower}, ' '), ' {{}} ')"
            canon = head.xpath(f"link[{rel.format('canonical')}]/@href").getall()
            node["html_canonical"] = _url(url, canon[0]) if canon else None
            for a in head.xpath(f"link[{rel.format('alternate')}][@hreflang]"):
                href = _url(url, a.attrib.get("href", ""))
                node["alternates"].append((a.attrib["hreflang"], href))
            robots = " ".join(
                head.xpath("meta[translate(@name, 'ROBTS', 'robts') = 'robots']/@content").getall()
            ).lower()
            node["noindex"] = bool({"noindex", "none"} & set(re.split(r"[\s,]+", robots)))
            header_canon = None
            for value in response.headers.getlist("Link"):
                for target, params in _LINK_HEADER.findall(value.decode("latin-1")):
                    if re.search(r'rel\s*=\s*"?canonical"?', params, re.I):
                        header_canon = _url(url, target)
            node["header_canonical"] = header_canon
            canonical = node["html_canonical"] or header_canon
            follow.extend(t for t in [canonical] if t)
            follow.extend(t for _, t in node["alternates"] if t)
        for target in follow:
            if self.in_scope(target):
                yield scrapy.Request(target, callback=self.parse)


def findings(
    spider: GraphSpider, max_click_depth: int = 4
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The audit's rules over the recorded graph (written from the README's descriptions),
    and the click depth distribution."""
    nodes, found = spider.nodes, {}
    robots = Protego.parse(spider.robots)

    def add(kind: str, url: str) -> None:
        found.setdefault(kind, set()).add(url)

    def resolve(url: str) -> tuple[str | None, int, bool]:
        """(final URL or None, hops, loop)."""
        seen, hops = {url}, 0
        while url in nodes and "location" in nodes[url]:
            nxt = nodes[url]["location"]
            if nxt is None:
                return None, hops, False
            hops += 1
            if nxt in seen:
                return None, hops, True
            seen.add(nxt)
            url = nxt
        return (url if url in nodes else None), hops, False

    pages = {u for u, n in nodes.items() if n["status"] == 200 and "html_canonical" in n}

    def node_of(url: str) -> str | None:
        final = resolve(url)[0]
        return final if final in pages else None

    inlinks: Counter[str] = Counter()
    followed: Counter[str] = Counter()
    linked: set[str] = set()
    for src in pages:
        targets = nodes[src]["links"]
        linked.update(t for t, _ in targets)
        for node in {node_of(t) for t, _ in targets} - {None, src}:
            inlinks[node] += 1  # type: ignore[index]
        for node in {node_of(t) for t, nf in targets if not nf} - {None, src}:
            followed[node] += 1  # type: ignore[index]
    seed = node_of(spider.seed)
    depth = {seed: 0} if seed else {}
    queue = deque(depth)
    while queue:
        src = queue.popleft()
        for t, _ in nodes[src]["links"]:
            node = node_of(t)
            if node is not None and node not in depth:
                depth[node] = depth[src] + 1
                queue.append(node)
    for url in linked:
        if not spider.in_scope(url):
            continue
        final, hops, loop = resolve(url)
        if loop:
            add("redirect_loop", url)
        elif hops:
            add("redirect_chain" if hops > 1 else "redirect", url)
        elif url not in nodes and not robots.can_fetch(url, "*"):
            add("linked_disallowed", url)
    for loc in spider.sitemap:
        if loc not in linked and loc != spider.seed and not inlinks.get(loc):
            add("orphan", loc)

    def canonical(url: str) -> str | None:
        n = nodes.get(url, {})
        return n.get("html_canonical") or n.get("header_canonical")

    for url in linked:
        c = canonical(url) if url in pages else None
        if c is not None and c != url:
            add("link_to_non_canonical", url)
    for url in pages:
        n = nodes[url]
        h, hd = n["html_canonical"], n["header_canonical"]
        if h and hd and h != hd:
            add("canonical_conflict", url)
        c = h or hd
        if c is None or c == url:
            continue
        if not spider.in_scope(c):
            add("canonical_out_of_scope", url)
            continue
        final, hops, loop = resolve(c)
        if hops and not loop and final is not None:
            add("canonical_redirect", url)
        elif final is None or nodes[final]["status"] != 200:
            add("canonical_not_ok", url)
        elif canonical(c) not in (None, c):
            add("canonical_chain", url)
    for loc, alts in spider.sitemap.items():
        if loc in pages:
            nodes[loc]["alternates"].extend((code, _url(loc, h)) for code, h in alts)
    for url in pages:
        alts = nodes[url]["alternates"]
        if not alts:
            continue
        codes = {code.lower() for code, _ in alts}
        for code, target in set(alts):
            if code.lower() != "x-default" and not _bcp47(code):
                add("hreflang_invalid_code", url)
            if target is None or target == url:
                continue
            final, hops, loop = resolve(target)
            if hops or final is None or nodes[final]["status"] != 200:
                add("hreflang_target_not_ok", url)
            elif canonical(target) not in (None, target):
                add("hreflang_target_non_canonical", url)
            elif not any(back == url for _, back in nodes[target]["alternates"]):
                add("hreflang_no_return", url)
        if len(codes) > 1 and "x-default" not in codes:
            add("hreflang_no_x_default", url)
    for url in pages:
        if depth.get(url, -1) > max_click_depth:
            add("deep_page", url)
        if url != seed and inlinks[url] and not followed[url]:
            add("nofollow_inlinks_only", url)
        elif url != seed and inlinks[url] == 1:
            add("single_inlink", url)
        if not nodes[url]["links"]:
            add("no_outlinks", url)
        if nodes[url]["noindex"] and inlinks[url]:
            add("linked_noindex", url)
    dist = Counter(str(depth[u]) if u in depth else "unreached" for u in pages)
    return {kind: sorted(urls) for kind, urls in sorted(found.items())}, dict(dist)


def _bcp47(code: str) -> bool:
    import langcodes  # noqa: PLC0415  (the registry of subtags; what a careful user would use)

    return "_" not in code and langcodes.tag_is_valid(code)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=0)
    ap.add_argument("--out", help="also write the result here (JSON)")
    args = ap.parse_args()
    settings = bench_settings(
        args.concurrency,
        args.time_limit,
        ROBOTSTXT_OBEY=True,
        REDIRECT_ENABLED=False,  # every hop seen
        HTTPERROR_ALLOW_ALL=True,
        RETRY_ENABLED=False,
    )
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(GraphSpider)
    t0 = time.perf_counter()
    process.crawl(crawler, start=args.url)
    process.start()
    spider = crawler.spider
    assert isinstance(spider, GraphSpider)
    crawled = time.perf_counter() - t0
    found, depth = findings(spider)
    html = [n for n in spider.nodes.values() if n["status"] == 200 and "html_canonical" in n]
    result = {
        "pages": len(html),
        "responses": len(spider.nodes),
        "edges": sum(len({t for t, _ in n["links"]}) for n in html),
        "depth": depth,
        "crawl_seconds": round(crawled, 3),
        "findings": found,
    }
    result["seconds"] = round(time.perf_counter() - t0, 3)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh)
    print(json.dumps({k: v for k, v in result.items() if k != "findings"}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
