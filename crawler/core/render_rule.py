"""The ``--render auto`` rule: does this page need a browser to show all its links?

Sans-I/O: bytes and counts in, a reason or None out; no browser, no network. The page job
keeps the page's first ``HEAD_BYTES`` as the body streams (one slice a chunk, only with
``render = "auto"``) and, when the page ends, asks :func:`judge` with the link count the
extractor already made. Nothing here runs a link: the scans are bytes methods and compiled
regular expressions over at most ``HEAD_BYTES`` (about 20 us each for 64 KB on the
benchmark machine: a page of many links is not scanned at all, the costlier scans run only
for a thin page).

The rule (docs/render.md, "auto"), first match wins:

1. ``MANY_LINKS`` links or more: the HTML carries its links -> None, with no scan at all
   (every documentation page: ``--render auto`` costs them one comparison);
2. no ``<script`` in the head: nothing could add a link -> None;
3. an EMPTY application mount point (``<div id="root"></div>``, ``id`` one of ``MOUNT_IDS``,
   or Angular's ``<app-root></app-root>``): a client-rendered shell -> ``"mount_point"``;
4. ``FEW_LINKS`` links or more: the HTML carries its links (a documentation page, a server-
   rendered app, a page with an analytics tag) -> None; so does a redirect page (a
   ``<meta http-equiv=refresh>``: its link is the refresh target, a script's
   ``location.replace`` goes to the same place);
5. then the page is thin, and one of: a client router's data (``__NEXT_DATA__``,
   ``window.__NUXT__``, ``data-server-rendered``, ``ng-version``, ``data-reactroot``) ->
   ``"client_router"``; a ``<noscript>`` that asks for JavaScript -> ``"noscript"``; more
   script than text, and little text (under ``THIN_TEXT`` bytes outside script/style/tags)
   -> ``"script_heavy"``; fewer links than scripts and little text -> ``"few_links"``;
6. else None.

Truncated heads (a page over ``HEAD_BYTES``) are judged on what was kept: a shell is small,
and a page of that size has its content in the HTML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "FEW_LINKS",
    "HEAD_BYTES",
    "MANY_LINKS",
    "MOUNT_IDS",
    "REASONS",
    "THIN_TEXT",
    "PageSignals",
    "judge",
    "needs_render",
    "scan",
]

#: Bytes of a page's start the rule reads (a client-rendered shell is a few KB).
HEAD_BYTES = 64 * 1024
#: A page with this many links or more carries its links in its HTML, whatever its scripts.
MANY_LINKS = 20
#: A page with this many links or more carries its links in its HTML unless its application
#: mount point is empty.
FEW_LINKS = 5
#: Bytes of visible text (outside script, style and tags, whitespace dropped) under which a
#: page is thin.
THIN_TEXT = 512
#: Ids of the elements frameworks mount an application into.
MOUNT_IDS = ("root", "app", "__next", "__nuxt", "svelte", "___gatsby", "q-app", "react-root")
#: Every reason ``needs_render`` gives, in the rule's order.
REASONS = ("mount_point", "client_router", "noscript", "script_heavy", "few_links")

# "<script" in any case: measured faster than three bytes.find or lower() and one find.
_ANY_SCRIPT = re.compile(rb"<[sS][cC][rR][iI][pP][tT]")
# Over the lower-cased head (one C pass), so that each search has a literal start to skip to.
_EMPTY_MOUNT = re.compile(
    rb"""id\s*=\s*["']?(?:"""
    + b"|".join(re.escape(i.encode()) for i in MOUNT_IDS)
    + rb""")(?:["'\s/][^<>]*)?>\s*(?:<!--[^<>]*-->\s*)?</[a-z]"""
)
_EMPTY_APP_ROOT = re.compile(rb"<app-root\b[^<>]*>\s*</app-root")
_REFRESH = re.compile(rb"<meta\b[^>]*http-equiv\s*=\s*[\"']?refresh")
_ROUTER = re.compile(
    rb"__next_data__|window\.__nuxt__|data-server-rendered|\bng-version=|data-reactroot"
)
_NOSCRIPT_JS = re.compile(
    rb"<noscript\b[^>]*>(?:(?!</noscript)[\s\S]){0,2000}?(?:javascript|enable\s+js)"
)
_SCRIPT_OR_STYLE = re.compile(
    rb"<(script|style)\b[^>]*>[\s\S]*?(?:</\1\s*>|\Z)|<!--[\s\S]*?(?:-->|\Z)"
)
_TAG_OR_SPACE = re.compile(rb"<[^>]*>|\s+|&[a-z]+;")


@dataclass(frozen=True, slots=True)
class PageSignals:
    """What the rule looks at. ``text_bytes``, ``script_bytes``, ``router`` and ``noscript``
    are measured only for a thin page (fewer than ``FEW_LINKS`` links, no empty mount point):
    -1/False otherwise, as the rule does not need them."""

    links: int  # the page's links (the extractor's count: every link occurrence)
    scripts: int  # "<script" in the head (-1: not scanned, the page has MANY_LINKS)
    empty_mount: bool = False
    refresh: bool = False  # a <meta http-equiv=refresh>: a redirect page
    router: bool = False
    noscript: bool = False
    text_bytes: int = -1
    script_bytes: int = -1


def scan(head: bytes, links: int) -> PageSignals:
    """The signals of a page from its first bytes ``head`` and its link count."""
    if links >= MANY_LINKS:
        return PageSignals(links, -1)  # not scanned: the rule needs no more
    if _ANY_SCRIPT.search(head) is None:  # (a page without one is not even lowered)
        return PageSignals(links, 0)
    head = head.lower()
    scripts = head.count(b"<script")
    if not scripts:
        return PageSignals(links, 0)
    if _empty_mount(head):
        return PageSignals(links, scripts, empty_mount=True)
    if links >= FEW_LINKS:
        return PageSignals(links, scripts)
    if _REFRESH.search(head) is not None:  # a redirect page: its link is the refresh's
        return PageSignals(links, scripts, refresh=True)
    without, cut = _SCRIPT_OR_STYLE.subn(b" ", head)
    text = len(_TAG_OR_SPACE.sub(b"", without))
    script_bytes = len(head) - len(without) + cut  # (each cut left one space)
    return PageSignals(
        links,
        scripts,
        router=_ROUTER.search(head) is not None,
        noscript=_NOSCRIPT_JS.search(head) is not None,
        text_bytes=text,
        script_bytes=script_bytes,
    )


def _empty_mount(head: bytes) -> bool:
    for found in _EMPTY_MOUNT.finditer(head):
        before = head[found.start() - 1 : found.start()]
        if before in (b" ", b"\t", b"\n", b"\r", b"\f", b"/"):  # the attribute, not "data-id"
            return True
    return b"<app-root" in head and _EMPTY_APP_ROOT.search(head) is not None


def needs_render(s: PageSignals) -> str | None:
    """Why the page needs a browser (one of ``REASONS``), or None: its HTML has its links."""
    if s.links >= MANY_LINKS or not s.scripts:
        return None
    if s.empty_mount:
        return "mount_point"
    if s.links >= FEW_LINKS or s.refresh:
        return None
    if s.router:
        return "client_router"
    if s.noscript:
        return "noscript"
    thin = 0 <= s.text_bytes < THIN_TEXT
    if thin and s.script_bytes > s.text_bytes:
        return "script_heavy"
    if thin and s.links < s.scripts:
        return "few_links"
    return None


def judge(chunks: list[bytes], links: int) -> str | None:
    """The rule on a body kept as the list of its chunks (joined only when it is scanned):
    the page job's one call."""
    if links >= MANY_LINKS:
        return None
    head = chunks[0][:HEAD_BYTES] if len(chunks) == 1 else b"".join(chunks)[:HEAD_BYTES]
    return needs_render(scan(head, links))
