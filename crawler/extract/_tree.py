"""The part of the tree builder that decides which elements exist: svg/math content and
frameset documents (and the templates that matter for them).

Shared by both extractors: `_machine` imports this module and the compiled twin
(`_extract_c.pyx`) includes this file's text and compiles it, so that one source gives both
the same behaviour on every input. Hence plain Python without ``from __future__`` (the file
is also Cython source): the annotations are evaluated, and Cython reads them as types.
"""

from collections.abc import Mapping

from ._html import _BREAKOUT, _INTEGRATION
from ._link import Link

# Runs of open svg/math elements kept (a run is one or more nested elements of the same name,
# so a million nested <g> cost one entry); deeper runs are not recorded, and their end tags
# then close the nearest recorded ancestor of that name.
_MAX_FOREIGN_DEPTH = 1024
# Tag names are kept up to this many bytes; a longer name matches no end tag and no link set
# entry (link sets may not name longer tags or attributes over _MAX_ANAME bytes).
_MAX_NAME = 256
_MAX_ANAME = 64
# The MathML annotation-xml integration point (encoding text/html or application/xhtml+xml):
# a space cannot occur in a tag name, so no element can be mistaken for it.
_AX_HTML = b"m:annotation-xml html"
_INTEG = (_INTEGRATION - {b"m:annotation-xml+html"}) | {_AX_HTML}
# HTML elements that have no end tag, and the table tags that close a cell.
_VOID = frozenset(
    b"area base basefont bgsound br col embed frame hr image img input keygen link meta "
    b"param source track wbr".split()
)
_TABLE_START = frozenset(b"caption col colgroup tbody td tfoot th thead tr".split())
_TABLE_END = frozenset(b"caption table tbody td tfoot th thead tr".split())

# What `ForeignStack.start` found a start tag to be.
F_HTML = 0  # HTML content: the caller processes it as an HTML start tag
F_ELEMENT = 1  # a foreign element (no raw-text switch, no link)
F_LINK = 2  # a foreign ``a`` element: its href is still a link


class ForeignStack:
    """The open svg/math elements, enough of the tree builder's stack of open elements to
    know whether a tag is in foreign content and where that content ends.

    Shared by both extractors, so that they agree on every input. Entries are ``b"s:name"``
    (SVG) or ``b"m:name"`` (MathML); nested elements of the same entry share one run
    (``runs[i]`` opened ``counts[i]`` times), and ``open`` counts the open elements per end-tag
    name, so an end tag that matches nothing costs one dict lookup and one that matches pops
    what it closes: every tag costs amortised O(1), whatever the nesting. At most
    `_MAX_FOREIGN_DEPTH` runs are kept (memory is bounded); a deeper run is not recorded.
    """

    __slots__ = ("runs", "keys", "counts", "open", "html", "hopen")

    def __init__(self) -> None:
        self.runs: list[bytes] = []
        self.keys: list[bytes] = []  # the end-tag name of each run
        self.counts: list[int] = []
        self.open: dict[bytes, int] = {}
        # HTML elements opened inside an integration point, as (len(runs) then, name): the
        # current node is one of them when the last entry is at the current level. Then an
        # end tag follows the HTML rules, which stop at the integration point.
        self.html: list[tuple[int, bytes]] = []
        self.hopen: dict[tuple[int, bytes], int] = {}  # entries of `html` per (level, name)

    def _pop_html(self) -> None:
        key = self.html.pop()
        self.hopen[key] -= 1

    def clear(self) -> None:
        """A table cell closed around the foreign content: all of it is gone."""
        self.runs.clear()  # (the same list object: the extractors hold it)
        self.keys.clear()
        self.counts.clear()
        self.open.clear()
        self.html.clear()
        self.hopen.clear()

    def push(self, entry: bytes, key: bytes) -> None:
        """Open an element: ``entry`` as in `runs`, ``key`` the name its end tag has."""
        runs = self.runs
        if runs and runs[-1] == entry:
            self.counts[-1] += 1
        elif len(runs) < _MAX_FOREIGN_DEPTH:
            runs.append(entry)
            self.keys.append(key)
            self.counts.append(1)
        else:
            return
        self.open[key] = self.open.get(key, 0) + 1

    def _pop_run(self) -> None:
        self.runs.pop()
        self.open[self.keys.pop()] -= self.counts.pop()
        html = self.html
        while html and html[-1][0] > len(self.runs):
            self._pop_html()

    def leave(self) -> None:
        """Pop up to the nearest integration point (a breakout tag, ``</br>``, ``</p>``)."""
        runs = self.runs
        while runs and runs[-1] not in _INTEG:
            self._pop_run()

    def end(self, name: bytes) -> None:
        """An end tag in foreign content (``name`` lower case)."""
        runs = self.runs
        html = self.html
        level = len(runs)
        if html and html[-1][0] == level:
            # The current node is an HTML element in an integration point: the HTML rules. A
            # table end tag closes the cell the svg/math is in (assumed: in a body it would
            # be ignored); another closes that element if open at this level, else it stops
            # at the integration point (special, a scope boundary): ignored.
            if name in _TABLE_END:
                self.clear()
                return
            if self.hopen.get((level, name)):  # (a miss costs one lookup; a hit pops)
                while html[-1][1] != name:
                    self._pop_html()
                self._pop_html()
            return
        if name == b"br" or name == b"p":
            self.leave()
            return
        if not self.open.get(name):
            # No open foreign element has that name: ignored. (The tree builder hands it to
            # the HTML rules, which would close the svg/math subtree if an enclosing HTML
            # element had that name; HTML elements outside it are not tracked here.)
            return
        keys = self.keys
        while keys[-1] != name:
            self._pop_run()
        self.counts[-1] -= 1
        self.open[name] -= 1
        if not self.counts[-1]:
            runs.pop()
            keys.pop()
            self.counts.pop()
            while html and html[-1][0] > len(runs):
                self._pop_html()

    def _html_start(self, name: bytes, sc: bool) -> None:
        """An HTML start tag in an integration point."""
        if name in _TABLE_START:
            self.clear()  # in a table cell it closes the cell (assumed, as for end tags)
        elif not sc and name not in _VOID and len(self.html) < _MAX_FOREIGN_DEPTH:
            key = (len(self.runs), name)
            self.html.append(key)
            self.hopen[key] = self.hopen.get(key, 0) + 1

    def start(self, name: bytes, attrs: Mapping[bytes, bytes | None], sc: bool) -> int:
        """A start tag while foreign content is open: `F_HTML`, `F_ELEMENT` or `F_LINK`."""
        top = self.runs[-1]
        if name in _BREAKOUT or (
            name == b"font" and (b"color" in attrs or b"face" in attrs or b"size" in attrs)
        ):
            self.leave()
            if self.runs:
                self._html_start(name, sc)
            return F_HTML
        if top in _INTEG and not (
            top[0] == 0x6D and top != _AX_HTML and (name == b"mglyph" or name == b"malignmark")
        ):
            self._html_start(name, sc)
            return F_HTML
        if not sc:
            # A child takes its parent's namespace; only <svg> under a MathML annotation-xml
            # starts an SVG subtree.
            key = name
            if name == b"svg" and (top == b"m:annotation-xml" or top == _AX_HTML):
                entry = b"s:svg"
            elif name == b"annotation-xml" and top[0] == 0x6D:
                entry = b"m:annotation-xml"
                enc = attrs.get(b"encoding")
                if enc is not None and enc.lower() in (b"text/html", b"application/xhtml+xml"):
                    entry = _AX_HTML
            else:
                if len(name) > _MAX_NAME:
                    key = b"\x00"  # stored short: no end tag can close it
                entry = (b"s:" if top[0] == 0x73 else b"m:") + key
            # (inline `push`: this is the path of every svg/math element)
            runs = self.runs
            if runs[-1] == entry:
                self.counts[-1] += 1
                self.open[key] += 1
            elif len(runs) < _MAX_FOREIGN_DEPTH:
                runs.append(entry)
                self.keys.append(key)
                self.counts.append(1)
                self.open[key] = self.open.get(key, 0) + 1
        return F_LINK if name == b"a" else F_ELEMENT


# Where a document stands with respect to <frameset> (`FramesetState.mode`). Below FS_DONE,
# text matters (non-whitespace text clears the frameset-ok flag); above it, only tags do.
FS_HEAD = 0  # no body yet (initial .. "after head"): a <frameset> takes effect
FS_BODY = 1  # in body, frameset-ok still "ok": a <frameset> would remove the body
FS_DONE = 2  # frameset-ok "not ok" in body: an ordinary document (a <frame> is ignored)
FS_FRAMESET = 3  # a <frameset> took effect: only frame and noframes start tags do anything
FS_TEMPLATE = 4  # (`FramesetState.view` only) a <template> is open: its content is no body
# Links held back while a <frameset> could still remove the body (`FramesetState.held`). Past
# this many, the flag is taken as "not ok" and they are released: memory stays bounded and the
# links stream again (a page of links with no text at all; a <frameset> after 512 of them is a
# documented deviation: its body's links are reported).
MAX_HELD = 512

# Start tags that stay in the head before the body exists (the rest create the body).
_HEAD_TAGS = frozenset(
    b"html head base basefont bgsound link meta noframes script style title noscript".split()
)
# Start tags after which a <frameset> in body no longer takes effect ("in body" rules).
# The end tags `FramesetState.end` acts on (the others need not reach it).
_FS_END = frozenset((b"br", b"body", b"html", b"frameset", b"template"))
_NOT_OK_TAGS = frozenset(
    b"pre listing li dd dt button applet marquee object table area br embed img image keygen "
    b"wbr hr textarea xmp iframe select template body".split()
)


# A <template>'s content: how its first element set the template's insertion mode.
T_UNDECIDED = 0
T_COLUMN = 1  # "in column group": everything but col and template is ignored
T_OTHER = 2
# Start tags a template processes "in head" without choosing a mode for its content.
_TEMPLATE_HEAD = frozenset(
    b"base basefont bgsound link meta noframes script style template title".split()
)


class FramesetState:
    """The tree builder's frameset-ok flag, whether a <frameset> took effect, and the open
    <template>s, shared by both extractors so that they agree on every input.

    Before the body exists ("after head") a <frameset> always takes effect; in a body it does
    while the flag is "ok" (the body holds only whitespace and elements that do not clear it),
    and then removes the body: the links found in the body meanwhile are held back (`held`),
    released in order once the flag goes "not ok" (or the document ends), dropped when a
    frameset takes effect. Holding costs what returning them would; it normally ends at the
    page's first text, and at most `MAX_HELD` links are held (past that they are released).
    After a frameset only ``frame`` (while a frameset is open) and ``noframes`` start tags
    make elements; a ``frame`` anywhere else makes none. A template whose first element is
    ``<col>`` ignores every start tag but col and template.

    `view` is what the extractors read: the mode, or FS_TEMPLATE while a template is open
    (below FS_DONE text matters; anything but FS_DONE means every tag does).
    """

    __slots__ = ("mode", "view", "held", "depth", "templates", "t_over")

    def __init__(self) -> None:
        self.mode = FS_HEAD
        self.view = FS_HEAD
        self.held: list[Link] = []
        self.depth = 0  # open <frameset>s (FS_FRAMESET)
        self.templates: list[int] = []  # T_* of each open <template>, at most 1024
        self.t_over = 0  # open <template>s past that cap (not recorded)

    def _update(self) -> None:
        self.view = FS_TEMPLATE if self.templates else self.mode

    def release(self, out: list[Link]) -> None:
        if self.held:
            out.extend(self.held)
            self.held = []

    def not_ok(self, out: list[Link]) -> None:
        """The flag goes "not ok" in the body (creating it if need be)."""
        self.mode = FS_DONE
        self.release(out)
        self._update()

    def cap_held(self, out: list[Link]) -> None:
        """Release the held links once there are more than `MAX_HELD` (see there)."""
        if len(self.held) > MAX_HELD:
            self.not_ok(out)

    def text(self, out: list[Link]) -> None:
        """Non-whitespace text (view below FS_DONE): it creates the body and clears the flag.
        (The body that "after head" creates sets the flag "ok" again, whatever a <template>
        in the head did.)"""
        self.not_ok(out)

    def _template(self) -> None:
        if len(self.templates) < 1024:
            self.templates.append(T_UNDECIDED)
        else:
            self.t_over += 1

    def start(self, name: bytes, attrs: Mapping[bytes, bytes | None], out: list[Link]) -> bool:
        """An HTML start tag (view not FS_DONE, or a template): True if the tree builder
        ignores it (no element: no link, no tokenizer switch)."""
        ignored = self._start(name, attrs, out)
        self._update()
        return ignored

    def _start(self, name: bytes, attrs: Mapping[bytes, bytes | None], out: list[Link]) -> bool:
        mode = self.mode
        if mode == FS_FRAMESET:
            if name == b"frameset":
                if self.depth:
                    self.depth += 1
                return True
            if name == b"frame":
                return not self.depth  # "after frameset": ignored
            return name != b"noframes"
        ts = self.templates
        if ts:  # a template's content: not the body
            top = ts[-1]
            if top == T_COLUMN and name != b"col" and name != b"template":
                return True
            if name == b"template":
                self._template()
            elif top == T_UNDECIDED and name not in _TEMPLATE_HEAD:
                ts[-1] = T_COLUMN if name == b"col" else T_OTHER
            return name == b"frame" or name == b"frameset"
        if name == b"frameset":
            if mode == FS_DONE:
                return False  # "not ok": ignored (no element, but nothing to skip either)
            self.mode = FS_FRAMESET
            self.held = []
            self.depth = 1
            return True
        if name == b"template":
            if mode != FS_HEAD:  # in body it clears the flag
                self.not_ok(out)
            self._template()
            return False
        if mode == FS_DONE:
            return name == b"frame"
        if mode == FS_HEAD and name in _HEAD_TAGS:
            return False
        if name in _NOT_OK_TAGS:
            self.not_ok(out)
        elif name == b"input":
            kind = attrs.get(b"type")
            if kind is None or kind.lower() != b"hidden":
                self.not_ok(out)
            else:
                self.mode = FS_BODY
        else:
            self.mode = FS_BODY
        return name == b"frame"  # a frame outside a frameset is ignored

    def end(self, name: bytes, out: list[Link]) -> None:
        """An end tag (view not FS_DONE)."""
        mode = self.mode
        if self.templates:
            if name == b"template":
                if self.t_over:
                    self.t_over -= 1
                else:
                    self.templates.pop()
                    self._update()
        elif mode == FS_FRAMESET:
            if name == b"frameset" and self.depth:
                self.depth -= 1
        elif mode == FS_DONE:
            return
        elif name == b"br":  # taken as <br>
            self.not_ok(out)
        elif mode == FS_HEAD and (name == b"body" or name == b"html"):
            self.mode = FS_BODY
            self._update()
