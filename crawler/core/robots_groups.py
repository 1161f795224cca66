"""Which robots.txt groups apply: RFC 9309 section 2.2.1, as Google's parser reads it.

Protego matches the path rules well (longest match, ``*``, ``$``, percent-encoding) but picks
groups its own way: it looks for a group's name anywhere in the string it is given (so with a
whole User-Agent header, groups named ``bot`` or ``python`` applied), takes a prefix of the
token for a match (``crawl`` applied to ``crawler``), and ends a group at any line it does not
know. So the groups are chosen here and Protego is given one ``*`` group holding only the rules
that apply (`select`):

* the crawler's product token (`product_token`) is compared with each ``User-agent`` value read
  up to its first character that is not a letter, ``_`` or ``-`` (``crawler/2.0`` names
  ``crawler``), case-insensitively, for equality;
* consecutive ``User-agent`` lines form one group; only an ``Allow`` or ``Disallow`` line ends
  the run of them, so an unknown line, a ``Sitemap`` or a ``Crawl-delay`` between two does not;
* every group naming the token applies, merged; when none does, every ``*`` group does (a group
  naming the token without rules allows everything: it does not fall back to ``*``);
* rules before any ``User-agent`` line are ignored; ``Sitemap`` lines count wherever they are.

Keys are read as Google's parser reads them: case-insensitively, by prefix, with its accepted
misspellings, and ``Key value`` with no colon when the line is exactly two words.
"""

from __future__ import annotations

import re

__all__ = ["product_token", "select"]

_TOKEN = re.compile(r"[A-Za-z_-]*")
_LINES = re.compile(r"\r\n|\r|\n")
_USER_AGENT = ("user-agent", "useragent", "user agent")
_ALLOW = ("allow",)
_DISALLOW = ("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw")
_SITEMAP = ("sitemap", "site-map")
_CRAWL_DELAY = ("crawl-delay", "crawl delay")


def product_token(agent: str) -> str:
    """The product token of a User-Agent (``crawler/0.1.0 (+url)`` -> ``crawler``), lowercased.

    RFC 9309 section 2.2.1: a crawler matches groups by the token, letters, ``_`` and ``-``;
    empty when the agent does not start with one (then only ``*`` groups apply).
    """
    match = _TOKEN.match(agent.strip())
    return match.group(0).lower() if match else ""


def _key_value(line: str) -> tuple[str, str] | None:
    """A line's (lowercased key, value), comments and surrounding blanks dropped, or None."""
    line = line.split("#", 1)[0].strip()
    if not line:
        return None
    key, sep, value = line.partition(":")
    if not sep:
        words = line.split()
        if len(words) != 2:  # Google: a blank separates only a two-word line
            return None
        key, value = words
    key = key.strip().lower()
    return (key, value.strip()) if key else None


class _Group:
    """A run of User-agent lines and the lines after it, up to the next such run."""

    __slots__ = ("generic", "lines", "ruled", "specific")

    def __init__(self) -> None:
        self.specific = False  # a User-agent line names the token
        self.generic = False  # a User-agent line is "*"
        self.ruled = False  # an Allow or Disallow line was seen: a User-agent starts another
        self.lines: list[str] = []  # its rules and crawl-delay, as Protego reads them


def select(text: str, agent: str) -> str:
    """A robots.txt of one ``*`` group: the rules of ``text`` that apply to ``agent``'s token.

    With the crawl-delay and the sitemaps of the file; what Protego parses from it is the
    verdict for the token (see the module docstring).
    """
    token = product_token(agent)
    groups: list[_Group] = []
    group: _Group | None = None  # the group lines go to; None before any User-agent line
    sitemaps: list[str] = []
    for raw in _LINES.split(text):
        kv = _key_value(raw)
        if kv is None:
            continue
        key, value = kv
        if key.startswith(_USER_AGENT):
            if group is None or group.ruled:
                group = _Group()
                groups.append(group)
            if value[:1] == "*" and (len(value) == 1 or value[1].isspace()):
                group.generic = True
            elif token and product_token(value) == token:
                group.specific = True
            continue
        if key.startswith(_SITEMAP):
            if value:
                sitemaps.append(value)
            continue
        if key.startswith(_ALLOW):
            line = "Allow: " + value
        elif key.startswith(_DISALLOW):
            line = "Disallow: " + value
        elif key in _CRAWL_DELAY:  # of the group, whichever of its names come after it
            if group is not None and value:
                group.lines.append("Crawl-delay: " + value)
            continue
        else:
            continue  # unknown: ignored, the group goes on
        if group is None:
            continue  # a rule before any User-agent line
        group.ruled = True
        if value:
            group.lines.append(line)
    named = any(g.specific for g in groups)
    chosen = [line for g in groups if (g.specific if named else g.generic) for line in g.lines]
    return "\n".join(["User-agent: *", *chosen, *("Sitemap: " + s for s in sitemaps), ""])
