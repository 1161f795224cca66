"""WHATWG URL resolution of attribute values, with a fast path for the common forms.

The full resolver is Ada (`ada_url.join_url`), a WHATWG URL parser. It costs about 1.4 us a
call, and a page has hundreds of links, so `Resolver` first tries a pure-Python fast path that
handles the forms most hrefs take when the base is http(s):

* absolute ``http://`` / ``https://`` with a plain ASCII host name and optional port,
* scheme-relative ``//host/...``, root-relative ``/path``, path-relative ``a/../b``,
  query-only ``?q`` and the empty string,

each with dot segments, an optional query and a fragment (dropped). The fast path accepts an
input only when every character is one that neither the path nor the query percent-encodes
and that the host parser would not map (letters, digits, ``-._~!$&()*+,;=:@/?%``); anything
else (backslashes, spaces, quotes, non-ASCII, ``%2e`` dot segments, IP addresses, IDNA,
userinfo, other schemes) goes to Ada. A hypothesis test checks that the fast path agrees with
Ada wherever it answers. Results are cached per resolver (a page repeats its links).

In a document whose encoding is neither UTF-8 nor UTF-16, the non-ASCII characters of a
query are first percent-encoded in that encoding (`encode_query`), as the URL parser does when
a browser resolves a link; Ada then sees ASCII there.

A value that does not resolve gives None, never an exception.
"""

from __future__ import annotations

import re

from ada_url import URL, join_url

_MISS = object()
_C0_SPACE = "".join(chr(i) for i in range(0x21))
_SAFE = re.compile(r"[A-Za-z0-9\-._~!$&()*+,;=:@/?%]*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# http(s)://host[:port][/path][?query] with a plain ASCII host name whose last label starts
# with a letter (so the IPv4 parser does not apply), no userinfo. Input is already _SAFE.
_ABSOLUTE = re.compile(
    r"([Hh][Tt][Tt][Pp][Ss]?)://((?:[A-Za-z0-9\-]+\.)*[A-Za-z][A-Za-z0-9\-]*\.?)"
    r"(?::([0-9]*))?(/[A-Za-z0-9\-._~!$&()*+,;=:@/%]*)?(\?[A-Za-z0-9\-._~!$&()*+,;=:@/?%]*)?"
)
_TAB_NL = str.maketrans("", "", "\t\n\r")
_DEFAULT_PORT = {"http": 80, "https": 443}
_CACHE_MAX = 4096


def _normalize(path: str) -> str:
    """Remove dot segments from an absolute path (the URL standard's path state)."""
    if "/." not in path:
        return path
    segs = path.split("/")
    out: list[str] = []
    last = len(segs) - 1
    i = 1
    while i <= last:
        seg = segs[i]
        if seg == "..":
            if out:
                out.pop()
            if i == last:
                out.append("")
        elif seg == ".":
            if i == last:
                out.append("")
        else:
            out.append(seg)
        i += 1
    return "/" + "/".join(out)


def _strip_fragment(href: str) -> str:
    h = href.find("#")
    return href if h < 0 else href[:h]


def full_resolve(base: str, raw: str) -> str | None:
    """Resolve with Ada only; the reference the fast path must agree with."""
    try:
        return _strip_fragment(join_url(base, raw))
    except Exception:  # ValueError: does not resolve; never let anything else escape either
        return None


_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
_SPECIAL = ("http", "https", "ftp", "file")  # ws/wss are special but their queries are UTF-8
# Bytes the special-query percent-encode set covers (C0, space, " # ' < >, and >= 0x7F).
_QUERY_SET = frozenset([*range(0x21), 0x22, 0x23, 0x27, 0x3C, 0x3E, *range(0x7F, 0x100)])


def _encode_run(run: str, codec: str) -> str:
    try:
        data = run.encode(codec)
    except (UnicodeError, LookupError):
        if len(run) > 1:
            return "".join([_encode_run(c, codec) for c in run])
        # Not in the encoding: the URL standard writes it as an HTML numeric reference.
        return f"%26%23{ord(run)}%3B"
    return "".join([f"%{b:02X}" if b in _QUERY_SET else chr(b) for b in data])


def encode_query(raw: str, codec: str, base_special: bool) -> str:
    """Percent-encode the non-ASCII characters of the query of ``raw`` in ``codec``.

    A browser encodes the query of a URL in a special scheme (http, https, ftp, file) with
    the document's encoding (the URL parser's "encoding" argument); Ada encodes as UTF-8. The
    rest of the URL (path, host, fragment) is UTF-8 either way, and ASCII is left to Ada.
    """
    h = raw.find("#")
    end = h if h >= 0 else len(raw)
    q = raw.find("?", 0, end)
    if q < 0 or raw[q:end].isascii():
        return raw
    m = _SCHEME.match(raw.lstrip(_C0_SPACE))
    special = base_special if m is None else m.group()[:-1].lower() in _SPECIAL
    if not special:
        return raw
    query = _NON_ASCII_RUN.sub(lambda r: _encode_run(r.group(), codec), raw[q:end])
    return raw[:q] + query + raw[end:]


class Resolver:
    """Resolves attribute values against one base URL (see the module docstring)."""

    __slots__ = (
        "base",
        "valid",
        "query_codec",
        "_special",
        "_fast",
        "_scheme",
        "_prefix",
        "_path",
        "_dir",
        "_base_nf",
        "_cache",
    )

    def __init__(self, base: str, query_codec: str | None = None) -> None:
        # query_codec: the Python codec of the document's encoding when that is neither UTF-8
        # nor UTF-16; link queries are then percent-encoded in it, as browsers do.
        self._cache: dict[str, object] = {}
        self.query_codec = query_codec
        self._special = False
        self._fast = False
        self._scheme = ""
        self._prefix = ""
        self._path = ""
        self._dir = ""
        try:
            u = URL(base)
            href = u.href
        except Exception:
            self.base = base
            self.valid = False
            self._base_nf = ""
            return
        self.base = href
        self.valid = True
        self._base_nf = _strip_fragment(href)
        proto = u.protocol
        self._special = proto[:-1] in _SPECIAL
        if proto == "http:" or proto == "https:":
            path = u.pathname
            start = len(proto) + 2
            cut = href.find("/", start)
            if cut > 0 and path.startswith("/") and href.startswith(path, cut):
                self._fast = True
                self._scheme = proto[:-1]
                self._prefix = href[:cut]
                self._path = path
                self._dir = path[: path.rfind("/") + 1]

    def resolve(self, raw: str) -> str | None:
        """Return the absolute URL for ``raw`` without its fragment, or None."""
        cache = self._cache
        r = cache.get(raw, _MISS)
        if r is _MISS:
            s = raw
            if self.query_codec is not None and not raw.isascii():
                s = encode_query(raw, self.query_codec, self._special)
            r = self._fast_path(s) if self._fast else _MISS
            if r is _MISS:
                r = self._slow(s)
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            cache[raw] = r
        return r  # type: ignore[return-value]

    def _slow(self, raw: str) -> str | None:
        if self.valid:
            return full_resolve(self.base, raw)
        try:
            return _strip_fragment(URL(raw).href)
        except Exception:
            return None

    def _fast_path(self, s: str) -> object:
        if s[:1] in "hH":
            # The common absolute form, checked and split by one regex.
            m = _ABSOLUTE.fullmatch(s)
            if m is not None:
                if "%" in s and ("%2e" in s or "%2E" in s):
                    return _MISS
                return _absolute(m)
        if _SAFE.fullmatch(s) is None:
            # Spaces to strip, tabs or newlines to remove, a fragment to drop: then retry.
            if s and (s[0] <= " " or s[-1] <= " "):
                s = s.strip(_C0_SPACE)
            if "\t" in s or "\n" in s or "\r" in s:
                s = s.translate(_TAB_NL)
            h = s.find("#")
            if h >= 0:
                s = s[:h]
            if _SAFE.fullmatch(s) is None:
                return _MISS
        if "%" in s and ("%2e" in s or "%2E" in s):
            return _MISS
        if not s:
            return self._base_nf
        c = s[0]
        if c == "/":
            if s.startswith("//"):
                m = _ABSOLUTE.fullmatch(self._scheme + ":" + s)
                return _MISS if m is None else _absolute(m)
            q = s.find("?")
            if q < 0:
                return self._prefix + _normalize(s)
            return self._prefix + _normalize(s[:q]) + s[q:]
        if c == "?":
            return self._prefix + self._path + s
        m = _ABSOLUTE.fullmatch(s)
        if m is not None:
            return _absolute(m)
        if _SCHEME.match(s) is not None:
            return _MISS
        q = s.find("?")
        if q < 0:
            return self._prefix + _normalize(self._dir + s)
        return self._prefix + _normalize(self._dir + s[:q]) + s[q:]


def _absolute(m: re.Match[str]) -> object:
    """An absolute http(s) URL matched by `_ABSOLUTE`: serialize it as the URL parser does."""
    scheme, host, port, path, query = m.groups()
    scheme = scheme.lower()
    host = host.lower()
    if "xn--" in host:
        return _MISS  # punycode must be validated: Ada's job
    if port is None:
        port = ""
    elif port:
        p = int(port)
        if p > 65535:
            return _MISS
        port = "" if p == _DEFAULT_PORT[scheme] else ":" + str(p)
    if path is None:
        path = "/"
    elif "/." in path:
        path = _normalize(path)
    return scheme + "://" + host + port + path + (query or "")
