"""The link extractor: a resumable HTML tokenizer that only looks where links can be.

Theory of operation
===================

`LinkExtractor.feed(chunk)` takes bytes as they arrive and returns the links completed by
them; `close()` ends the document. Nothing here does I/O (no sockets, no asyncio): bytes in,
`Link` objects out, so the same object serves a streaming fetcher, a file and a test.

Encoding. The first bytes are held until the encoding is known (see `charset`): a BOM (3
bytes), else the caller's transport charset, else a ``<meta>`` prescan of the first 1024
bytes, else, as browsers detect it, UTF-8 if those bytes have non-ASCII and are valid UTF-8,
windows-1252 if they are not; if they are all ASCII, windows-1252 until the first non-ASCII
attribute value decoded, which is UTF-8 when it is valid UTF-8 (all of these are tentative: a
later ``<meta charset>`` still applies). Every encoding the standard lists is
ASCII-compatible for markup except UTF-16 and ISO-2022-JP: for those an incremental decoder
turns the bytes into text, re-encoded as UTF-8, and that is what is scanned. Everything else
is scanned as raw bytes and only the attribute values that become links are decoded.

Tokenizing. The HTML standard's tokenizer is followed where it decides what is a tag, an
attribute and its value, and which text is not markup at all (comments, bogus comments,
doctype, raw text, RCDATA, script data with its escaped states, plaintext, CDATA in foreign
content). It is not walked character by character: each state is one compiled regular
expression or ``bytes.find`` that jumps to where that state ends (the states and their
patterns: `_states`; a link set's tables and the limits: `_linkset`).

* In the data state, the "boring" regex (`_boring`, one per link set, run in C) skips text,
  comments, bogus comments, doctypes, end tags and every start tag whose name cannot matter,
  matching each tag in full so that quotes in attribute values are honoured. It stops at a
  start tag that matters
  (link tags, ``base``, ``meta``, raw-text switches, ``svg``/``math``) or at a construct that
  the buffer does not hold completely.
* In foreign content (svg/math open) every tag matters, so `_foreign_tags` takes them in one
  loop: skipper and whole tag in one regex run (`_FOREIGN_STEP`), and the element stack moved
  inline for a tag that does nothing else; the others go on as below.
* A tag that matters is matched whole by `_TAG`; the attributes of interest are taken from it
  with `_ATTR`. A tag split by the end of the buffer is finished by the streaming tag machine
  (`_tag_stream`, sub-states ``TS_*``), which keeps only the tag name, the attribute being
  read and the attributes of interest; the attributes a chunk holds whole are taken in one
  `_COMPLETE_ATTRS` match, so an endless tag costs one regex run per chunk.
* Comments, bogus comments, CDATA, raw text and script data are searched for their end with
  one regex each; when the end is not in the buffer, only the last few bytes (a possible
  partial end marker) are kept.

Where links stand
-----------------
Every Link has the line and column (1-based) of its tag's ``<``. The scanned stream is counted
lazily, when a tag emits (`_locate`) and when a buffer is let go (`_advance`): line breaks as
the standard's newline normalisation makes them (CR LF one, a lone CR one, also when a CR LF
is split between chunks), then the code points since the last one, so each byte is counted
once. Columns are code points of the decoded document (SARIF's ``unicodeCodePoints``): one a
byte in single-byte encodings; UTF-8 and the CJK encodings by their decoder, an invalid
sequence one U+FFFD per maximal invalid part as Python's (and the standard's) decoders make
them, a partial character just before a ``<`` one; UTF-16 and ISO-2022-JP are counted in the
decoded text (their escape sequences and BOM are no characters, nor is a UTF-8 BOM). After a
tag changes the codec (a late ``<meta charset>``, or the first non-ASCII value deciding a
guess), what follows that tag is counted in the new one; the tag itself, in the old.
A tag cut by a chunk boundary keeps the position of its ``<`` (`_w_line`, `_w_col`).

Fragment targets (``collect_ids``): the ``id`` of every start tag (and ``name`` of an HTML
``<a>``) is kept as any wanted attribute is, and the data-state skipper stops at every start
tag; see `LinkExtractor` for what counts.

Head facts (``head_facts``): until the first start tag that cannot stand in a head
(`_headfacts.HEAD_SCOPE`) the data-state skipper stops at every tag (`_hscan`), and
`_head_tag` sees each start tag before it does anything else: the one that ends the head, or
a ``<link>``, ``<meta>`` or ``<base>`` whose kept attributes go to `_headfacts.head_tag`
(the compiled twin decides both from its tag table's flags, in C). Then the link set's own
skipper is back: the links are the same with it on or off.

Rules this module keeps
-----------------------
1. Chunk invariance: any split of the same bytes gives the same links. State lives in
   instance attributes only; a construct cut by the buffer end is either kept whole (a few
   bytes at most: ``<``, ``<!-``, ``</``...) or carried by an explicit state.
2. Linear time whatever the chunking: no state rescans data it has already searched. The
   unconsumed tail carried between feeds is at most 10 bytes (``</noframes``), plus the
   value of the attribute being read.
3. Bounded memory: an attribute value longer than ``max_token`` bytes (default 64 KiB) is
   dropped whole (never cut into a wrong URL) and the tag still ends where the standard says.
   Only attributes that can produce a link are kept at all; the stack of open svg/math
   elements is kept as runs of one name (1024 runs at most, `_tree.ForeignStack`), so are
   the HTML elements open in their integration points (1024) and the open templates (1024);
   tag names are kept up to 256 bytes; the URL cache of a resolver holds 4096, the head
   facts (``head_facts``) 4096 canonicals and 4096 alternates. Every one of
   these caps is the same in both twins (tests/test_extract_limits.py).
4. Never raises on any input: malformed markup is tokenized as the standard says. An
   unexpected error (a bug) while a tag's values become links drops that tag's links and
   the tokenizer goes on; one in the tokenizer itself stops extraction for that document,
   after returning the links found so far (held ones included). ``_strict`` (set by the
   tests) raises instead.

Deviations, on purpose
----------------------
* ``<base href>``: the first one sets the base for the links that follow it; links before it
  were already resolved against the document URL (a browser, which has the whole document,
  resolves every link against that first base).
* Tree construction is not run. It matters for links in a few places, approximated thus:
  ``svg``/``math`` subtrees are tracked with a stack of foreign element names (breakout tags,
  HTML and MathML text integration points); ``noscript`` is parsed as if scripting were off
  (as html5lib does by default, and what a crawler wants); a link inside ``<select>`` is
  reported (the current standard keeps it; html5lib 1.1 drops it), so are links inside
  ``<template>`` (inert in a browser, but in the DOM). HTML elements opened inside an
  integration point (``<svg><foreignObject><div>``) are tracked by name only (no implied end
  tags): an end tag there follows the HTML rules, which stop at the integration point, and a
  table tag there is taken to close the table cell around the svg/math (in a body a browser
  would ignore it). HTML elements outside svg/math are not tracked: an end tag matching no
  open svg/math element is ignored (a browser closes the svg when an enclosing HTML element
  has that name), and a CDATA section inside HTML in an integration point is taken as CDATA.
  A tag name over 256 bytes is kept short: no end tag closes such a foreign element.
* Frameset documents follow the standard (`FramesetState`): the frameset-ok flag (cleared by
  non-whitespace text in the body and by the start tags the "in body" rules name), a
  ``<frameset>`` that takes effect removing the body (its links so far, held back until the
  flag is known, are dropped), after it only ``frame``/``noframes``, and no ``frame`` element
  outside a frameset. A character reference in text is counted as text (``&#32;`` would not
  be), and so is a CDATA section in svg/math: then a later ``<frameset>`` does not take effect.
* A ``<meta charset>`` past the 1024-byte prescan, while the encoding is only a guess, is
  applied to the values that follow it (a browser re-parses the whole document).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from typing import Any

from . import _states
from . import charset as _charset
from ._headfacts import HEAD_FACT_TAGS, HEAD_SCOPE, HeadFacts, head_tag
from ._html import _BREAKOUT, _WS_SPLIT, LINK_SETS, dom_text, parse_srcset, refresh_url
from ._link import Link, make_link
from ._linkset import (
    _ID_ATTRS,
    MAX_ID_CHARS,
    MAX_IDS,
    MAX_TOKEN,
    _Config,
    _link_config,
    link_set_key,
)
from ._resolve import Resolver
from ._states import (
    _RAWTEXT_END,
    E_BYTES,
    E_REPLACEMENT,
    E_TRANSCODE,
    E_UNDECIDED,
    S_BOGUS,
    S_CDATA,
    S_COMMENT,
    S_COMMENT_START,
    S_DATA,
    S_DEAD,
    S_RAWTEXT,
    S_SCRIPT,
    S_SCRIPT_DESC,
    S_SCRIPT_ESC,
    S_TAG,
    TS_AFTER_NAME,
    TS_ANAME,
    TS_ATTRS,
    TS_BEFORE_VALUE,
    TS_DQ,
    TS_NAME,
    TS_SQ,
    TS_UNQ,
)
from ._tree import (
    _FS_END,
    _HEAD_TAGS,
    _INTEG,
    _MAX_ANAME,
    _MAX_FOREIGN_DEPTH,
    _MAX_NAME,
    _TABLE_END,
    F_HTML,
    F_LINK,
    FS_BODY,
    FS_DONE,
    FS_HEAD,
    FS_TEMPLATE,
    ForeignStack,
    FramesetState,
)
from .charset import MULTIBYTE_CODECS, Iso2022JPDecoder

_new = tuple.__new__
# The objects whose methods the scanner calls (``_TAG.match(...)``) are bound here, not
# imported by name: CPython 3.11 compiles a method call on an imported name as an attribute
# load and a call of a bound method (no LOAD_METHOD), a few percent slower on these paths.
_TAG = _states._TAG
_ATTR = _states._ATTR
_COMPLETE_ATTRS = _states._COMPLETE_ATTRS
_COMMENT_END = _states._COMMENT_END
_SKIP_WS = _states._SKIP_WS
_SKIP_WS_SLASH = _states._SKIP_WS_SLASH
_NAME_CHARS = _states._NAME_CHARS
_ANAME_CHARS = _states._ANAME_CHARS
_UNQ_CHARS = _states._UNQ_CHARS
_SCRIPT_DATA = _states._SCRIPT_DATA
_SCRIPT_ESC = _states._SCRIPT_ESC
_SCRIPT_DESC = _states._SCRIPT_DESC
_BORING_FOREIGN = _states._BORING_FOREIGN
_TRACK_SKIP = _states._TRACK_SKIP
_FOREIGN_STEP = _states._FOREIGN_STEP
_FOREIGN_STEP_TRACK = _states._FOREIGN_STEP_TRACK
_HAS_ID = _states._HAS_ID
_SWITCH = _states._SWITCH

# Start tags the fast path of `_tag_match` leaves to `_start`.
_SLOW_TAGS = frozenset((b"svg", b"math", b"form", b"template"))
# In foreign content (`_foreign_tags`): start tags with a rule of their own (HTML breakout,
# <font> that may be one, a link, annotation-xml), and end tags the frameset state or the
# form pointer sees: `_tag_match` takes them.
_F_START_SLOW = _BREAKOUT | {b"font", b"a", b"annotation-xml"}
_F_END_SLOW = _FS_END | {b"form"}

_CONFIGS: dict[Any, _Config] = {}


class LinkExtractor:
    """Streaming link extractor for one HTML document.

    Args:
        base_url: the document's URL; relative links resolve against it until a ``<base
            href>`` is seen.
        encoding: the charset label from the Content-Type header, if any.
        link_set: ``"links"`` (a/area href, frame/iframe src, meta refresh), ``"resources"``
            (adds img, script, link, source, video, audio, track, embed, object, form, button,
            input), or a mapping ``{tag: (attr, ...)}`` of lower-case names.
        max_token: the longest attribute value kept (bytes); longer values are dropped.
        collect_ids: collect the document's fragment targets in `ids` (off: no cost).
        head_facts: read what the head says about the page into `head` (`_headfacts`; off:
            no cost, and on it changes no link).

    Attributes:
        ids: with ``collect_ids``, every ``id`` attribute value of an element and every
            ``name`` of an HTML ``<a>``, as the DOM holds them (exact, case-sensitive; empty
            values are no target), outside ``<template>`` content (which a browser's
            ``getElementById`` and fragment navigation do not search; svg/math elements
            are searched, so their ids count). Complete once `close` returned.
        ids_complete: False when `ids` may lack a target: not collected, more than
            `MAX_IDS` ids or `MAX_ID_CHARS` code points of them, an id value over
            ``max_token`` bytes, or extraction stopped early. A checker then must not call a
            fragment missing. (`ids` errs the other way: a start tag the tree builder
            ignores, e.g. a ``<form>`` inside a form, still gives its id, and while the
            encoding is a guess a non-ASCII id is kept decoded both ways.)
        head: with ``head_facts``, the head's canonicals, alternates, base and robots
            noindex (`_headfacts.HeadFacts`), complete once the head has ended; else None.
    """

    _strict = False

    def __init__(
        self,
        base_url: str,
        encoding: str | None = None,
        *,
        link_set: str | Mapping[str, Any] = "links",
        max_token: int = MAX_TOKEN,
        collect_ids: bool = False,
        head_facts: bool = False,
    ) -> None:
        key = (link_set_key(link_set), bool(collect_ids), bool(head_facts))
        config = _CONFIGS.get(key)
        if config is None:
            spec = LINK_SETS[key[0]] if isinstance(key[0], str) else dict(key[0])
            config = _link_config(spec, key[1], key[2])
            _CONFIGS[key] = config
        # Per tag name: attributes producing links (bytes -> str names), attributes kept, the
        # tag's name as str, and the data-state skipper for this set of tags.
        self._links, self._want, self._tagstr, self._boring = config
        # Head facts: while the head lasts (`_hscan`) the skipper stops at every tag, so that
        # the first one that starts the body is seen; then the link set's skipper is back.
        self.head: HeadFacts | None = HeadFacts() if head_facts else None
        self._hscan = bool(head_facts)
        self._boring_body = self._boring
        if head_facts:
            self._boring = _BORING_FOREIGN
        # The kept attributes of a tag not in `_want`: None, or ``id`` while collecting ids.
        self._wdef = _ID_ATTRS if collect_ids else None
        self.ids: set[str] = set()
        self._ids: set[str] | None = self.ids if collect_ids else None
        self._id_chars = 0
        self.ids_complete = bool(collect_ids)
        self._doc_url = base_url
        self._resolver = Resolver(base_url)
        self._query_codec: str | None = None
        self._base_seen = False
        self.nofollow = False
        self._max = max_token
        # Encoding.
        self._transport = _charset.lookup(encoding)
        self.encoding = self._transport or "windows-1252"
        self._estate = E_UNDECIDED
        self._tentative = False
        self._sniff = False  # the first non-ASCII value still decides UTF-8 or not
        self._pending = b""
        self._codec = "cp1252"
        self._errors = "crawler-whatwg"
        self._decoder: Any = None
        # Tokenizer.
        self._buf = b""
        self._state = S_DATA
        self._end_re: re.Pattern[bytes] | None = None
        self._fst = ForeignStack()
        self._foreign = self._fst.runs  # the same list: empty means HTML content
        self._fs = FramesetState()
        self._fmode = FS_HEAD  # self._fs.mode, read on every tag
        self._form = False  # the tree builder's form element pointer is set
        self._closed = False
        # Streaming tag.
        self._ts = TS_NAME
        self._t_end = False
        self._t_name = b""
        self._t_attrs: dict[bytes, bytes | None] = {}
        self._t_slash = False
        self._a_name: bytes | None = None
        self._a_val: list[bytes] | None = None
        self._a_len = 0
        # Where links stand (`_locate`): the scanned stream (the document's bytes, or the
        # UTF-8 of its text when transcoded) is counted up to `_cnt`, lazily: when a tag
        # emits and when a buffer is let go.
        self._cur = b""  # the buffer being scanned; `_off`: its stream offset
        self._off = 0
        self._end = 0  # stream bytes scanned so far
        self._cnt = 0
        self._lines = 0  # line breaks before _cnt
        self._col = 0  # code points from the start of that line to _cnt
        self._cr = False  # the byte before _cnt is a CR (a CRLF may be split)
        self._cdec: Any = None  # multi-byte encodings: the decoder that counts code points
        self._t_at = -1  # stream offset of the current tag's '<'; -1: in _w_line, _w_col
        self._t_stop = 0  # stream offset just past the start tag being emitted
        self._w_line = 1
        self._w_col = 1

    @property
    def base_url(self) -> str:
        """The base URL links resolve against now (the first ``<base href>`` once seen)."""
        return self._resolver.base if self._resolver.valid else self._doc_url

    # Public API ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Link]:
        """Consume the next chunk; return the links it completed, in document order."""
        out: list[Link] = []
        if self._closed or self._state == S_DEAD:
            return out
        try:
            self._feed(bytes(data), False, out)
        except Exception:
            if self._strict:
                raise
            self._state = S_DEAD
            self.ids_complete = False
            self._fs.release(out)
        return out

    def close(self) -> list[Link]:
        """End of document: return the last links (a tag cut by the end is not a tag)."""
        out: list[Link] = []
        if self._closed:
            return out
        self._closed = True
        if self._state == S_DEAD:
            return out
        try:
            self._feed(b"", True, out)
        except Exception:
            if self._strict:
                raise
            self.ids_complete = False
        self._fs.release(out)
        self._state = S_DEAD
        self._buf = b""
        return out

    # Encoding -----------------------------------------------------------------------------

    def _feed(self, data: bytes, final: bool, out: list[Link]) -> None:
        st = self._estate
        if st == E_BYTES:
            self._scan(data, final, out)
            return
        if st == E_UNDECIDED:
            data = self._pending + data
            need = 3 if self._transport is not None else 1024
            b = _charset.bom(data)
            if b is None and len(data) < need and not final:
                self._pending = data
                return
            self._pending = b""
            if b is not None:
                name, skip = b
                data = data[skip:]
            else:
                found = self._transport or _charset.prescan(data)
                self._tentative = found is None
                name = found or self._undeclared(data, final)
            self._decide(name)
            st = self._estate
            if st == E_BYTES:
                self._scan(data, final, out)
                return
        if st == E_TRANSCODE:
            text = self._decoder.decode(data, final)
            self._scan(text.encode("utf-8", "surrogatepass"), final, out)
        # E_REPLACEMENT: the whole document decodes to one U+FFFD: no markup, no links.

    def _undeclared(self, data: bytes, final: bool) -> str:
        """No BOM, no transport charset, no <meta> in the prescan: as browsers do, valid UTF-8
        in the first 1024 bytes means UTF-8, invalid means windows-1252; an ASCII-only window
        leaves windows-1252 as a guess that the first non-ASCII value decoded decides."""
        window = data[:1024]
        name = _charset.detect_undeclared(window, final and len(data) <= 1024)
        self._sniff = name is None
        return name or "windows-1252"

    def _sniff_value(self, v: bytes) -> None:
        """The first non-ASCII value of a document undeclared and ASCII in its first 1024
        bytes: UTF-8 if it is valid UTF-8 (and still only a guess)."""
        self._sniff = False
        name = _charset.detect_undeclared(v, True)
        if name is not None and name != self.encoding:
            self._count_tag()
            self._decide(name)

    def _count_tag(self) -> None:
        """Count the stream to the end of the start tag being emitted, before that tag
        changes the encoding (a sniffed value, a late ``<meta charset>``): the tag itself is
        counted in the encoding it was read in, what follows it in the new one. Where the
        change took effect at its '<' instead, the tag's bytes already counted when a chunk
        ended inside it were in the old encoding, the rest in the new: columns then
        depended on the chunking."""
        self._locate()
        self._advance(self._cur, self._t_stop - self._off)

    def _decide(self, name: str) -> None:
        self.encoding = name
        if name == "replacement":
            self._estate = E_REPLACEMENT
            return
        codec, errors = _charset.python_codec(name)
        try:
            codecs.lookup(codec)
        except LookupError:
            codec, errors = "cp1252", "crawler-whatwg"
            self.encoding = "windows-1252"
        if name in _charset.TRANSCODE:
            if name == "iso-2022-jp":
                self._decoder = Iso2022JPDecoder()
            else:
                self._decoder = codecs.getincrementaldecoder(codec)("replace")
            self._estate = E_TRANSCODE
            self._codec, self._errors = "utf-8", "replace"
        else:
            self._estate = E_BYTES
            self._codec, self._errors = codec, errors
        self._count_as(self._codec, self._errors)
        # Link queries are percent-encoded in the document's encoding (UTF-16 pages use UTF-8).
        qc = None if name in ("utf-8", "utf-16le", "utf-16be") else codec
        self._query_codec = qc
        r = self._resolver
        self._resolver = Resolver(r.base if r.valid else self._doc_url, qc)

    # Where links stand ----------------------------------------------------------------------

    def _count_as(self, codec: str, errors: str) -> None:
        """Count the code points that follow in ``codec`` (the encoding was decided, or
        changed by a tag: `_count_tag` has counted to that tag's end; a pending partial
        character is one U+FFFD)."""
        if self._cdec is not None and self._cdec.getstate()[0]:
            self._col += 1
        self._cdec = (
            codecs.getincrementaldecoder(codec)(errors) if codec in MULTIBYTE_CODECS else None
        )

    def _advance(self, buf: bytes, x: int) -> None:
        """Count the stream up to ``buf[x]`` (``buf`` starts at stream offset `_off`): line
        breaks as the standard's newline normalisation makes them (CR LF is one, a lone CR
        one), then the code points since the last one. Linear: each byte is counted once."""
        c = self._cnt - self._off
        if x <= c:
            return
        nl = buf.count(b"\n", c, x)
        cr = buf.count(b"\r", c, x)
        last = -1
        if cr:
            nl += cr - buf.count(b"\r\n", c, x)
            last = max(buf.rfind(b"\n", c, x), buf.rfind(b"\r", c, x))
        elif nl:
            last = buf.rfind(b"\n", c, x)
        if self._cr and buf[c] == 0x0A:
            nl -= 1  # the LF of a CR LF split between two buffers
        self._cr = buf[x - 1] == 0x0D
        self._lines += nl
        dec = self._cdec
        if last >= 0:
            c = last + 1
            col = 0
            if dec is not None:
                dec.reset()
        else:
            col = self._col
        if x > c:
            col += x - c if dec is None else len(dec.decode(buf[c:x]))
        self._col = col
        self._cnt = self._off + x

    def _locate(self) -> None:
        """The line and column of the current tag's '<' into `_w_line`, `_w_col`."""
        at = self._t_at
        if at >= 0:
            self._t_at = -1
            self._advance(self._cur, at - self._off)
            self._w_line = self._lines + 1
            # A partial character before a '<' is one U+FFFD there.
            dec = self._cdec
            self._w_col = self._col + (2 if dec is not None and dec.getstate()[0] else 1)

    # Values and links ---------------------------------------------------------------------

    def _text(self, v: bytes, sniff: bool = True) -> str:
        """An attribute value as the DOM holds it: decoded, references and newlines done
        (``sniff``: the first non-ASCII value may decide a guessed encoding)."""
        if v.isascii():
            s = v.decode("ascii")
            if "&" not in s and "\r" not in s and "\x00" not in s:
                return s
            return dom_text(s)
        if sniff and self._sniff and self._tentative:
            self._sniff_value(v)
        return dom_text(v.decode(self._codec, self._errors))

    def _add_id(self, v: bytes | None) -> None:
        """One fragment target (``None``: a value over ``max_token`` bytes, dropped)."""
        ids = self._ids
        if ids is None:
            return
        if v is None:
            self.ids_complete = False
            return
        # An id does not decide a guessed encoding (links must not depend on collect_ids):
        # while it is a guess, a non-ASCII id is kept decoded both ways (no false "missing").
        s = self._text(v, False)
        more = None
        if self._sniff and self._tentative and not v.isascii():
            more = dom_text(v.decode("utf-8", "replace"))
        for t in (s, more):
            if t and t not in ids:
                if len(ids) >= MAX_IDS or self._id_chars + len(t) > MAX_ID_CHARS:
                    self.ids_complete = False
                    return
                self._id_chars += len(t)
                ids.add(t)

    def _collect(self, name: bytes, attrs: dict[bytes, bytes | None], html: bool) -> None:
        """The fragment targets of a start tag: its id; an HTML ``<a>``'s name."""
        if b"id" in attrs:
            self._add_id(attrs[b"id"])
        if html and name == b"a" and b"name" in attrs:
            self._add_id(attrs[b"name"])

    def _emit(self, tag: bytes, attrs: dict[bytes, bytes | None], out: list[Link]) -> None:
        """Links of a start tag in HTML content (or a foreign element with a link attr).

        An unexpected error while turning a tag's values into links (a bug in a value
        parser, say) drops that tag's links only: the tokenizer goes on with the rest of the
        document (``_strict``, set by the tests, raises instead)."""
        n = len(out)
        self._locate()
        try:
            self._emit_links(tag, attrs, out)
        except Exception:
            if self._strict:
                raise
            del out[n:]

    def _emit_links(self, tag: bytes, attrs: dict[bytes, bytes | None], out: list[Link]) -> None:
        spec = self._links.get(tag)
        if spec is not None and attrs:
            nofollow = False
            rel = attrs.get(b"rel")
            if rel is not None:
                nofollow = "nofollow" in _WS_SPLIT.split(self._text(rel).lower())
            tagstr = self._tagstr[tag]
            resolve = self._resolver.resolve
            ln = self._w_line
            co = self._w_col
            for a, astr in spec:
                v = attrs.get(a)
                if v is None:
                    continue
                raw = self._text(v)
                # A value that does not resolve is still a link (url None): a checker reports it.
                if a == b"srcset":
                    for u in parse_srcset(raw):
                        out.append(_new(Link, (resolve(u), u, tagstr, astr, nofollow, ln, co)))
                    continue
                out.append(_new(Link, (resolve(raw), raw, tagstr, astr, nofollow, ln, co)))
        if tag == b"base":
            # (a <base> in a template's content is not in the document: no base)
            if (
                not self._base_seen
                and attrs.get(b"href") is not None
                and self._fmode != FS_TEMPLATE
            ):
                self._base_seen = True
                href = attrs[b"href"]
                assert href is not None
                url = self._resolver.resolve(self._text(href))
                if url is not None and not url.startswith(("data:", "javascript:")):
                    self._resolver = Resolver(url, self._query_codec)
        elif tag == b"meta":
            self._meta(attrs, out)

    def _meta(self, attrs: dict[bytes, bytes | None], out: list[Link]) -> None:
        if self._tentative:
            self._meta_charset(attrs)
        content = attrs.get(b"content")
        if content is None:
            return
        equiv = attrs.get(b"http-equiv")
        if equiv is not None and self._text(equiv).lower() == "refresh":
            raw = refresh_url(self._text(content))
            if raw is not None:
                url = self._resolver.resolve(raw)
                out.append(make_link(url, raw, "meta", "content", False, self._w_line, self._w_col))
        name = attrs.get(b"name")
        if name is not None and self._text(name).lower() == "robots":
            for tok in self._text(content).lower().replace(",", " ").split():
                if tok == "nofollow" or tok == "none":
                    self.nofollow = True

    def _meta_charset(self, attrs: dict[bytes, bytes | None]) -> None:
        """A <meta> charset seen while the encoding is only tentative (no BOM, no transport
        charset, nothing in the 1024-byte prescan): a browser would re-parse the document in
        that encoding; a stream cannot, so the values that follow are decoded with it."""
        cs = attrs.get(b"charset")
        name: str | None = None
        if cs is not None:
            name = _charset.lookup(cs.decode("latin-1"))
        else:
            equiv = attrs.get(b"http-equiv")
            content = attrs.get(b"content")
            if equiv is not None and content is not None and equiv.lower() == b"content-type":
                name = _charset.charset_from_content(content)
        if name is None:
            return
        self._tentative = False
        if name in ("utf-16be", "utf-16le"):
            name = "utf-8"
        elif name == "x-user-defined":
            name = "windows-1252"
        if name != self.encoding and name not in _charset.TRANSCODE and name != "replacement":
            self._count_tag()
            self._decide(name)

    # Tags ---------------------------------------------------------------------------------

    def _emit_body(self, name: bytes, attrs: dict[bytes, bytes | None], out: list[Link]) -> None:
        """`_emit`, into the held links while a <frameset> could still remove the body."""
        if self._fmode == FS_BODY:
            self._emit(name, attrs, self._fs.held)
            self._fs.cap_held(out)
            self._fmode = self._fs.view
        else:
            self._emit(name, attrs, out)

    def _start(
        self, name: bytes, attrs: dict[bytes, bytes | None], sc: bool, out: list[Link]
    ) -> None:
        """A complete start tag: links, then the tokenizer state the tree builder would set."""
        if self._foreign:
            kind = self._fst.start(name, attrs, sc)
            if kind != F_HTML:
                # A foreign element: no raw-text switching; an SVG <a href> is still a link.
                if self._ids is not None and self._fmode != FS_TEMPLATE:
                    self._collect(name, attrs, False)
                if kind == F_LINK and b"a" in self._links:
                    self._emit_body(name, attrs, out)
                return
        if self._ids is not None and self._fmode != FS_TEMPLATE:
            self._collect(name, attrs, True)
        if self._fmode != FS_DONE or name == b"template":
            ignored = self._fs.start(name, attrs, out)
            self._fmode = self._fs.view
            if ignored:
                return
        elif name == b"frame":
            return  # no frame element outside a frameset
        if name in self._want:
            if name == b"form":
                if self._form:
                    return  # a form start tag while a form is open is ignored
                self._form = True
            self._emit_body(name, attrs, out)
        sw = _SWITCH.get(name)
        if sw is not None:
            self._state = sw
            if sw == S_RAWTEXT:
                self._end_re = _RAWTEXT_END[name]
        elif (name == b"svg" or name == b"math") and not sc:
            if name == b"svg":
                self._fst.push(b"s:svg", b"svg")
            else:
                self._fst.push(b"m:math", b"math")

    def _head_tag(self, name: bytes, attrs: dict[bytes, bytes | None]) -> None:
        """A start tag while the head is read (before the tag does anything else): the end
        of the head, or a fact. In a template's content or svg/math content, nothing. An
        unexpected error drops this tag's fact only (``_strict`` raises)."""
        if self._foreign or self._fmode == FS_TEMPLATE:
            return
        if name not in HEAD_SCOPE:
            self._hscan = False
            self._boring = self._boring_body
        elif name in HEAD_FACT_TAGS:
            self._locate()
            facts = self.head
            try:
                if facts is not None:
                    head_tag(facts, name, attrs, self._w_line, self._w_col, self._head_text)
            except Exception:
                if self._strict:
                    raise

    def _head_text(self, v: bytes) -> str:
        return self._text(v, False)  # (a head fact decides no guessed encoding)

    def _fs_end(self, name: bytes, out: list[Link]) -> None:
        self._fs.end(name, out)
        self._fmode = self._fs.view

    def _fs_text(self, out: list[Link]) -> None:
        """Text that is not whitespace (or a character reference: counted as text) while a
        <frameset> could still take effect: it no longer can."""
        self._fs.text(out)
        self._fmode = self._fs.view

    def _tag_match(self, buf: bytes, m: re.Match[bytes], out: list[Link]) -> None:
        """A tag matched whole by `_TAG` (the hot path: kept flat on purpose)."""
        name = m.group(2).lower()
        if m.group(1):
            if self._foreign:
                self._fst.end(name)
            if self._fmode != FS_DONE and name in _FS_END:
                self._fs_end(name, out)
            if name == b"form":
                self._form = False
            return
        self._t_stop = self._off + m.end()
        attrs: dict[bytes, bytes | None] = {}
        s, e = m.span(3)
        wdef = self._wdef
        want = self._want.get(name, wdef)
        if want is not None and e - s > 4096:
            # A huge tag: read its attributes only if a wanted name occurs in it at all.
            low = buf[s:e].lower()
            for w in want:
                if w in low:
                    break
            else:
                want = None
        if want is not None and s < e:
            mx = self._max
            for an, v1, v2, v3 in _ATTR.findall(buf, s, e):
                an = an.lower()
                if an in want and an not in attrs:
                    v = v1 or v2 or v3
                    attrs[an] = v if len(v) <= mx else None
        if self._hscan:
            self._head_tag(name, attrs)
        fm = self._fmode
        if (
            self._foreign
            or name in _SLOW_TAGS
            or (fm != FS_DONE and not (fm == FS_HEAD and name in _HEAD_TAGS))
        ):
            # (a head element before the body is what the fast path below does anyway)
            end = m.end()
            self._start(name, attrs, end - 2 >= e and buf[end - 2] == 0x2F, out)
            return
        if self._ids is not None:
            self._collect(name, attrs, True)
        if want is not wdef and name != b"frame":  # no frame element outside a frameset
            self._emit(name, attrs, out)
        sw = _SWITCH.get(name)
        if sw is not None:
            self._state = sw
            if sw == S_RAWTEXT:
                self._end_re = _RAWTEXT_END[name]

    def _foreign_tags(self, buf: bytes, pos: int, out: list[Link]) -> int:
        """The data state in foreign content, a loop over tags. A tag that only opens or
        closes svg/math elements costs one regex run (skipper and tag together) and a few
        list and dict operations, done here inline (`ForeignStack.start` and `end` are the
        reference; tests/test_extract_foreign.py holds the two paths to the same links and
        states); through `_tag_match`, `_start` and the stack's methods it cost three Python
        calls, twice the time. Returns where it stopped: after a tag handed to `_tag_match`
        (HTML, a link, an id to collect, a name with a rule of its own: it may change the
        state, end foreign content or change the frameset mode the skipper depends on),
        after the tag that closed the last foreign element, or at what `_scan` does itself
        (text while a <frameset> could take effect, CDATA, a tag cut by the buffer's end)."""
        step = (_FOREIGN_STEP_TRACK if self._fmode < FS_DONE else _FOREIGN_STEP).match
        fst = self._fst
        runs = fst.runs
        keys = fst.keys
        counts = fst.counts
        fopen = fst.open
        html = fst.html
        ids = self._ids is not None
        while True:
            m: re.Match[bytes] = step(buf, pos)  # type: ignore[assignment]  # (matches "")
            slash, name = m.group(1, 2)
            if name is None:
                return m.end()
            name = name.lower()
            if slash:
                if name in _F_END_SLOW:
                    self._tag_match(buf, m, out)
                    return m.end()
                level = len(runs)
                if html and html[-1][0] == level:
                    # The current node is HTML in an integration point: `end` acts only on
                    # a table end tag or the name of an HTML element open at this level.
                    if name in _TABLE_END or fst.hopen.get((level, name)):
                        fst.end(name)
                        if not runs:
                            return m.end()
                elif keys[-1] == name and not html:
                    # It closes the innermost element (no run is named "p" or "br").
                    fopen[name] -= 1
                    c = counts[-1] - 1
                    if c:
                        counts[-1] = c
                    else:
                        runs.pop()
                        keys.pop()
                        counts.pop()
                        if level == 1:
                            return m.end()
                elif fopen.get(name) or (name == b"p" and runs[-1] not in _INTEG):
                    fst.end(name)  # (it pops runs; "</p>" up to an integration point)
                    if not runs:
                        return m.end()
                # Else `end` would do nothing: no open foreign element has that name, or a
                # "</p>" with an integration point already the current node.
            else:
                top = runs[-1]
                if (
                    name in _F_START_SLOW
                    or top in _INTEG
                    or top == b"m:annotation-xml"
                    or len(name) > _MAX_NAME
                    or (ids and _HAS_ID.search(buf, m.start(3), m.end(3)))
                ):
                    self._t_at = self._off + m.start(1) - 1
                    self._tag_match(buf, m, out)
                    return m.end()
                pos = m.end()
                if buf[pos - 2] != 0x2F or pos - 2 < m.end(3):  # not self-closing
                    # (the top run's key is the name: its entry is the one this would push)
                    if keys[-1] == name:
                        counts[-1] += 1
                        fopen[name] += 1
                    elif len(runs) < _MAX_FOREIGN_DEPTH:
                        runs.append((b"s:" if top[0] == 0x73 else b"m:") + name)
                        keys.append(name)
                        counts.append(1)
                        fopen[name] = fopen.get(name, 0) + 1
                continue
            pos = m.end()

    def _tag_stream(self, buf: bytes, pos: int, n: int, out: list[Link]) -> int:
        """Continue a tag the buffer did not hold whole; return where it stopped."""
        while pos < n:
            ts = self._ts
            if ts == TS_ATTRS:
                m = _SKIP_WS_SLASH.match(buf, pos)
                e = m.end()  # type: ignore[union-attr]
                if e > pos:
                    self._t_slash = buf[e - 1] == 0x2F
                    pos = e
                    if pos >= n:
                        return pos
                c = buf[pos]
                if c == 0x3E:  # '>'
                    return self._tag_done(pos + 1, out)
                self._t_slash = False
                # Attributes the buffer holds whole are taken in one match, as in `_TAG`;
                # only the last, cut one goes through the states below.
                e = _COMPLETE_ATTRS.match(buf, pos).end()  # type: ignore[union-attr]
                if e > pos:
                    want = None if self._t_end else self._want.get(self._t_name, self._wdef)
                    if want is not None:
                        attrs = self._t_attrs
                        # A huge tag: look at each attribute only if a wanted name not yet
                        # seen occurs in the region at all.
                        low = buf[pos:e].lower()
                        for w in want:
                            if w not in attrs and w in low:
                                break
                        else:
                            want = None
                    if want is not None:
                        for an, v1, v2, v3 in _ATTR.findall(buf, pos, e):
                            an = an.lower()
                            if an in want and an not in attrs:
                                v = v1 or v2 or v3
                                attrs[an] = v if len(v) <= self._max else None
                    pos = e
                    continue
                self._begin_attr(buf[pos : pos + 1])
                self._ts = TS_ANAME
                pos += 1
            elif ts == TS_ANAME:
                m = _ANAME_CHARS.match(buf, pos)
                e = m.end()  # type: ignore[union-attr]
                if self._a_name is not None and e > pos:
                    self._a_name += buf[pos:e]
                    if len(self._a_name) > _MAX_ANAME:
                        self._a_name = None
                pos = e
                if pos >= n:
                    return pos
                self._name_done()
                c = buf[pos]
                if c == 0x3D:  # '='
                    self._ts = TS_BEFORE_VALUE
                    pos += 1
                elif c == 0x2F or c == 0x3E:
                    self._end_attr(b"")
                    self._ts = TS_ATTRS
                else:
                    self._ts = TS_AFTER_NAME
            elif ts == TS_AFTER_NAME:
                pos = _SKIP_WS.match(buf, pos).end()  # type: ignore[union-attr]
                if pos >= n:
                    return pos
                if buf[pos] == 0x3D:
                    self._ts = TS_BEFORE_VALUE
                    pos += 1
                else:
                    self._end_attr(b"")
                    self._ts = TS_ATTRS
            elif ts == TS_BEFORE_VALUE:
                pos = _SKIP_WS.match(buf, pos).end()  # type: ignore[union-attr]
                if pos >= n:
                    return pos
                c = buf[pos]
                if c == 0x22:
                    self._ts = TS_DQ
                    pos += 1
                elif c == 0x27:
                    self._ts = TS_SQ
                    pos += 1
                elif c == 0x3E:
                    self._end_attr(b"")
                    self._ts = TS_ATTRS
                else:
                    self._ts = TS_UNQ
            elif ts == TS_DQ or ts == TS_SQ:
                q = buf.find(b'"' if ts == TS_DQ else b"'", pos)
                if q < 0:
                    self._add_val(buf, pos, n)
                    return n
                self._add_val(buf, pos, q)
                self._finish_val()
                self._ts = TS_ATTRS
                pos = q + 1
            elif ts == TS_UNQ:
                e = _UNQ_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
                self._add_val(buf, pos, e)
                pos = e
                if pos >= n:
                    return pos
                self._finish_val()
                self._ts = TS_ATTRS
            else:  # TS_NAME
                e = _NAME_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
                if e > pos:
                    k = _MAX_NAME + 1 - len(self._t_name)
                    if k > 0:  # kept up to one byte past the cap: "over the cap"
                        self._t_name += buf[pos : min(e, pos + k)]
                    pos = e
                if pos >= n:
                    return pos
                self._t_name = self._t_name.lower()
                self._ts = TS_ATTRS
                self._t_slash = False
        return pos

    def _begin_attr(self, first: bytes) -> None:
        self._a_name = first
        self._a_val = []
        self._a_len = 0

    def _name_done(self) -> None:
        """The attribute name is complete: keep reading it only if it can matter."""
        name = self._a_name
        if name is not None:
            name = name.lower()
            want = self._want.get(self._t_name, self._wdef)
            self._a_name = name if (not self._t_end and want is not None and name in want) else None

    def _add_val(self, buf: bytes, s: int, e: int) -> None:
        if self._a_val is None or self._a_name is None or e <= s:
            return
        self._a_len += e - s
        if self._a_len > self._max:
            self._a_val = None
        else:
            self._a_val.append(buf[s:e])

    def _finish_val(self) -> None:
        val = self._a_val
        self._end_attr(None if val is None else b"".join(val))

    def _end_attr(self, value: bytes | None) -> None:
        name = self._a_name
        self._a_name = None
        self._a_val = None
        if name is None or self._t_end:
            return
        attrs = self._t_attrs
        if name not in attrs:
            attrs[name] = value

    def _tag_done(self, pos: int, out: list[Link]) -> int:
        self._state = S_DATA
        name = self._t_name
        if self._t_end:
            if self._foreign:
                self._fst.end(name)
            if self._fmode != FS_DONE and name in _FS_END:
                self._fs_end(name, out)
            if name == b"form":
                self._form = False
        else:
            self._t_stop = self._off + pos
            attrs = self._t_attrs
            self._t_attrs = {}
            if self._hscan:
                self._head_tag(name, attrs)
            self._start(name, attrs, self._t_slash, out)
        return pos

    def _begin_tag(self, end: bool, at: int) -> None:
        """A tag whose '<' is at ``buf[at]`` that the buffer does not hold whole."""
        self._t_at = self._off + at
        self._state = S_TAG
        self._ts = TS_NAME
        self._t_end = end
        self._t_name = b""
        self._t_attrs = {}
        self._t_slash = False
        self._a_name = None
        self._a_val = None

    # The scanner --------------------------------------------------------------------------

    def _scan(self, data: bytes, final: bool, out: list[Link]) -> None:
        buf = self._buf + data if self._buf else data
        self._off = self._end - len(self._buf)
        self._end += len(data)
        self._cur = buf
        self._buf = b""
        n = len(buf)
        pos = 0
        keep = -1  # where the unconsumed tail starts, if any
        while pos < n:
            state = self._state
            if state == S_DATA:
                if self._foreign:
                    p = self._foreign_tags(buf, pos, out)
                    if p != pos or self._state != S_DATA:
                        pos = p
                        continue
                if self._fmode < FS_DONE:
                    # A <frameset> could still take effect: every tag and all text matter.
                    pos = _TRACK_SKIP.match(buf, pos).end()  # type: ignore[union-attr]
                    if pos >= n:
                        break
                    if buf[pos] != 0x3C:
                        self._fs_text(out)
                        continue
                elif self._foreign or self._fmode != FS_DONE:
                    # Foreign content, a head <template>, a frameset: every tag matters.
                    pos = _BORING_FOREIGN.match(buf, pos).end()  # type: ignore[union-attr]
                else:
                    pos = self._boring.match(buf, pos).end()
                if pos >= n:
                    break
                # buf[pos] is '<' starting something that matters or is incomplete.
                if pos + 1 >= n:
                    keep = pos
                    break
                c = buf[pos + 1]
                if (0x61 <= c <= 0x7A) or (0x41 <= c <= 0x5A):
                    m = _TAG.match(buf, pos)
                    if m is not None:
                        self._t_at = self._off + pos
                        self._tag_match(buf, m, out)
                        pos = m.end()
                    else:
                        self._begin_tag(False, pos)
                        pos += 1
                elif c == 0x2F:  # '/'
                    if pos + 2 >= n:
                        keep = pos
                        break
                    c = buf[pos + 2]
                    if (0x61 <= c <= 0x7A) or (0x41 <= c <= 0x5A):
                        m = _TAG.match(buf, pos)
                        if m is not None:
                            self._tag_match(buf, m, out)
                            pos = m.end()
                        else:
                            self._begin_tag(True, pos)
                            pos += 2
                    elif c == 0x3E:
                        pos += 3
                    else:
                        self._state = S_BOGUS
                        pos += 2
                elif c == 0x21:  # '!'
                    rest = buf[pos + 2 : pos + 9]
                    if rest[:2] == b"--":
                        self._state = S_COMMENT_START
                        pos += 4
                    elif self._foreign and rest == b"[CDATA[":
                        self._state = S_CDATA
                        pos += 9
                        if self._fmode < FS_DONE:
                            self._fs_text(out)  # its text (taken to be some) is text
                    elif len(rest) < 7 and (
                        b"--".startswith(rest) or (self._foreign and b"[CDATA[".startswith(rest))
                    ):
                        keep = pos
                        break
                    else:
                        self._state = S_BOGUS
                        pos += 2
                elif c == 0x3F:  # '?'
                    self._state = S_BOGUS
                    pos += 1
                else:
                    pos += 1
                    if self._fmode < FS_DONE:
                        self._fs_text(out)  # a '<' that starts nothing is text
            elif state == S_TAG:
                pos = self._tag_stream(buf, pos, n, out)
            elif state == S_COMMENT_START:
                c = buf[pos]
                if c == 0x3E:
                    self._state = S_DATA
                    pos += 1
                elif c == 0x2D:
                    if pos + 1 >= n:
                        keep = pos
                        break
                    if buf[pos + 1] == 0x3E:
                        self._state = S_DATA
                        pos += 2
                    else:
                        self._state = S_COMMENT
                else:
                    self._state = S_COMMENT
            elif state == S_COMMENT:
                m = _COMMENT_END.search(buf, pos)
                if m is None:
                    keep = max(pos, n - 3)
                    break
                self._state = S_DATA
                pos = m.end()
            elif state == S_BOGUS:
                i = buf.find(b">", pos)
                if i < 0:
                    pos = n
                    break
                self._state = S_DATA
                pos = i + 1
            elif state == S_CDATA:
                i = buf.find(b"]]>", pos)
                if i < 0:
                    keep = max(pos, n - 2)
                    break
                self._state = S_DATA
                pos = i + 3
            elif state == S_RAWTEXT:
                m = self._end_re.search(buf, pos)  # type: ignore[union-attr]
                if m is None:
                    keep = max(pos, n - 10)
                    break
                self._state = S_DATA
                pos = m.start()
            elif state == S_SCRIPT:
                m = _SCRIPT_DATA.search(buf, pos)
                if m is None:
                    keep = max(pos, n - 8)
                    break
                if buf[m.start() + 1] == 0x21:  # '<!--'
                    self._state = S_SCRIPT_ESC
                    pos = m.start() + 2
                else:
                    self._state = S_DATA
                    pos = m.start()
            elif state == S_SCRIPT_ESC:
                m = _SCRIPT_ESC.search(buf, pos)
                if m is None:
                    keep = max(pos, n - 8)
                    break
                s = m.start()
                if buf[s] == 0x2D:  # '-->'
                    self._state = S_SCRIPT
                    pos = m.end()
                elif buf[s + 1] == 0x2F:  # '</script'
                    self._state = S_DATA
                    pos = s
                else:  # '<script' + one of ws / >
                    self._state = S_SCRIPT_DESC
                    pos = m.end()
            elif state == S_SCRIPT_DESC:
                m = _SCRIPT_DESC.search(buf, pos)
                if m is None:
                    keep = max(pos, n - 8)
                    break
                self._state = S_SCRIPT if buf[m.start()] == 0x2D else S_SCRIPT_ESC
                pos = m.end()
            else:  # S_PLAINTEXT, S_DEAD
                pos = n
        if not final:
            # The buffer is let go: count it (the kept tail is scanned again), first finding
            # where a tag that goes on in the next chunk began.
            if self._state == S_TAG and self._t_at >= 0:
                self._locate()
            self._advance(buf, keep if keep >= 0 else n)
        self._cur = b""
        if keep >= 0 and not final:
            self._buf = buf[keep:]
