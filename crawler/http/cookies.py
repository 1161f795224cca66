"""Netscape/Mozilla cookies.txt: load it into the crawl's cookie jar, save the jar as one.

The format browsers' exporters, curl and wget read and write: one cookie a line, seven
TAB-separated fields::

    domain  include_subdomains  path  secure  expiry  name  value

``include_subdomains`` and ``secure`` are ``TRUE``/``FALSE``; ``expiry`` is Unix seconds, 0 for
a session cookie; a domain prefixed ``#HttpOnly_`` is an HttpOnly cookie (curl's extension);
other lines starting with ``#`` and blank lines are comments. A malformed line is an
:class:`~crawler.http.errors.OptionError` naming the option, the file, the line and the
reason, so the CLI fails before crawling (exit 2). Expired cookies are skipped on load (as
browsers do).

The jar is aiohttp's ``CookieJar`` (domain/path/secure matching as RFC 6265 says). Saving is
atomic (a temporary file in the same directory, renamed over the target) and the file is mode
0600: it holds session tokens.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from http.cookies import CookieError, Morsel
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yarl import URL

from crawler.http.errors import OptionError

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "Cookie",
    "fill_jar",
    "format_cookies_txt",
    "jar_cookies",
    "load_cookies",
    "parse_cookies_txt",
    "save_cookies",
]

HTTPONLY_PREFIX = "#HttpOnly_"
HEADER = (
    "# Netscape HTTP Cookie File\n# Written by crawler (https://curl.se/docs/http-cookies.html)\n"
)
log = logging.getLogger("crawler")
_FLAGS = {"TRUE": True, "FALSE": False}
# Cookie names Python's Morsel (so aiohttp's jar) cannot hold: its attribute names.
_RESERVED = frozenset(Morsel._reserved)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Cookie:
    """One cookies.txt line. ``expires`` 0 = a session cookie."""

    domain: str  # without the leading dot and without #HttpOnly_
    include_subdomains: bool
    path: str
    secure: bool
    expires: int
    name: str
    value: str = field(repr=False)  # a session token, often
    http_only: bool = False

    def line(self) -> str:
        """The cookies.txt line (no newline)."""
        domain = ("." + self.domain) if self.include_subdomains else self.domain
        if self.http_only:
            domain = HTTPONLY_PREFIX + domain
        flag = {True: "TRUE", False: "FALSE"}
        return "\t".join(
            (
                domain,
                flag[self.include_subdomains],
                self.path,
                flag[self.secure],
                str(self.expires),
                self.name,
                self.value,
            )
        )


def _parse_line(line: str) -> Cookie | str:
    """A Cookie, or why the line is not one."""
    http_only = line.startswith(HTTPONLY_PREFIX)
    if http_only:
        line = line[len(HTTPONLY_PREFIX) :]
    fields = line.split("\t")
    if len(fields) != 7:
        if len(fields) < 7 and len(line.split()) >= 6:
            return f"expected 7 TAB-separated fields, got {len(fields)} (spaces are not separators)"
        return f"expected 7 TAB-separated fields, got {len(fields)}"
    domain, sub, path, secure, expiry, name, value = fields
    if not domain or any(c.isspace() for c in domain):
        return "the domain (field 1) is empty or holds a space"
    for i, flag in ((2, sub), (4, secure)):
        if flag.upper() not in _FLAGS:
            return f"field {i} must be TRUE or FALSE, not {flag[:20]!r}"
    if not path.startswith("/"):
        return f"the path (field 3) must start with '/', not {path[:40]!r}"
    expiry_text = expiry.strip()
    whole = expiry_text.split(".", 1)[0] if expiry_text.count(".") == 1 else expiry_text
    if not (whole.isascii() and whole.isdigit()):
        return f"the expiry (field 5) must be Unix seconds (0 = session), not {expiry[:20]!r}"
    if not name:
        return "the cookie name (field 6) is empty"
    if name.lower() not in _RESERVED:  # "path", "secure"...: skipped by fill_jar, not an error
        try:
            _new_morsel(name, value)
        except CookieError:
            return f"{name[:40]!r} is not a valid cookie name"
    if any(c in value for c in "\r\n\0;"):
        return f"the value of cookie {name[:40]!r} holds ';', a line break or NUL"
    dotted = domain.startswith(".")
    return Cookie(
        domain=domain.lstrip(".").lower(),
        include_subdomains=_FLAGS[sub.upper()] or dotted,
        path=path,
        secure=_FLAGS[secure.upper()],
        expires=int(whole),
        name=name,
        value=value,
        http_only=http_only,
    )


def _new_morsel(name: str, value: str) -> Morsel[str]:
    """A Morsel whose value and coded value are ``value`` (CookieError for a bad name)."""
    morsel: Morsel[Any] = Morsel()
    morsel.set(name, value, value)
    return morsel


def parse_cookies_txt(
    text: str, *, where: str = "cookies.txt", option: str = "--cookies"
) -> list[Cookie]:
    """Every cookie of a cookies.txt text, in file order; OptionError at the first bad line."""
    cookies: list[Cookie] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or (line.startswith("#") and not line.startswith(HTTPONLY_PREFIX)):
            continue
        parsed = _parse_line(line)
        if isinstance(parsed, str):
            raise OptionError(option, f"{where}: line {number}: {parsed}")
        cookies.append(parsed)
    return cookies


def load_cookies(path: str | os.PathLike[str], *, option: str = "--cookies") -> list[Cookie]:
    """Read and parse a cookies.txt file; OptionError if it cannot be read or parsed."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise OptionError(option, f"{os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data[: exc.start].count(b"\n") + 1
        raise OptionError(option, f"{os.fspath(path)}: line {number}: not UTF-8 text") from None
    return parse_cookies_txt(text, where=os.fspath(path), option=option)


def fill_jar(jar: aiohttp.CookieJar, cookies: Iterable[Cookie], now: float | None = None) -> int:
    """Put ``cookies`` in ``jar`` (expired ones skipped); how many went in."""
    now = time.time() if now is None else now
    count = 0
    for c in cookies:
        if c.expires and c.expires <= now:
            continue
        if c.name.lower() in _RESERVED:
            log.warning("cookie %r for %s skipped: the jar cannot hold that name", c.name, c.domain)
            continue
        morsel = _new_morsel(c.name, c.value)  # the value is sent as the file has it
        morsel["path"] = c.path
        if c.include_subdomains:
            morsel["domain"] = c.domain
        if c.secure:
            morsel["secure"] = True
        if c.http_only:
            morsel["httponly"] = True
        if c.expires:
            morsel["expires"] = formatdate(c.expires, usegmt=True)
        host = c.domain.strip("[]")
        origin = URL.build(scheme="https" if c.secure else "http", host=host, path=c.path)
        before = len(jar)
        jar.update_cookies({c.name: morsel}, response_url=origin)
        count += len(jar) > before
    return count


def jar_cookies(jar: aiohttp.CookieJar) -> list[Cookie]:
    """The jar's live cookies as cookies.txt lines (host-only vs domain cookies kept apart)."""
    host_only = jar.host_only_cookies
    # aiohttp keeps each cookie's absolute deadline in a private dict (a Max-Age is relative
    # to when it was received); without it, an Expires attribute is the best we know.
    deadlines = getattr(jar, "_expirations", None)
    if not isinstance(deadlines, dict):
        deadlines = {}
    out: list[Cookie] = []
    for morsel in jar:
        domain = morsel["domain"] or ""
        path = morsel["path"] or "/"
        key = (domain, path.rstrip("/"), morsel.key)
        expires = 0
        deadline = deadlines.get(key)
        if isinstance(deadline, (int, float)):
            expires = int(deadline)
        elif morsel["expires"]:
            try:
                expires = int(parsedate_to_datetime(morsel["expires"]).timestamp())
            except (TypeError, ValueError, IndexError, OverflowError):
                expires = 0
        out.append(
            Cookie(
                domain=domain,
                include_subdomains=key not in host_only,
                path=path,
                secure=bool(morsel["secure"]),
                expires=expires,
                name=morsel.key,
                value=morsel.coded_value,
                http_only=bool(morsel["httponly"]),
            )
        )
    return out


def format_cookies_txt(cookies: Iterable[Cookie]) -> str:
    """A cookies.txt text (with the usual header comment)."""
    return HEADER + "\n" + "".join(c.line() + "\n" for c in cookies)


def save_cookies(
    jar: aiohttp.CookieJar, path: str | os.PathLike[str], *, option: str = "--save-cookies"
) -> int:
    """Write the jar to ``path`` atomically, mode 0600; how many cookies were written."""
    cookies = jar_cookies(jar)
    text = format_cookies_txt(cookies)
    target = Path(path)
    directory = target.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OptionError(option, f"{os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            os.fchmod(f.fileno(), 0o600)  # mkstemp's mode already; said aloud
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(cookies)


def check_save_path(path: str | os.PathLike[str], *, option: str = "--save-cookies") -> None:
    """OptionError now if ``path`` could not be written at the end (no such directory...)."""
    target = Path(path)
    directory = target.parent
    if target.is_dir():
        raise OptionError(option, f"{os.fspath(path)} is a directory")
    if not directory.is_dir():
        raise OptionError(option, f"{os.fspath(directory)}: no such directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OptionError(option, f"{os.fspath(directory)}: not writable")
