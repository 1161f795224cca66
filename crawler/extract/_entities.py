"""Character references in attribute values (HTML standard, "character reference state").

The named table is Python's copy of the standard's table (`html.entities.html5`), not a
hand-typed one. Rules kept here, for attribute values only:

* named: the longest name in the table wins; a name matched *without* its semicolon (the
  legacy names such as ``&amp`` or ``&copy``) stays literal when the next character is ``=``
  or an ASCII alphanumeric (``&amp=``, ``&ampx``, ``&notit;`` stay as written);
* numeric (``&#...;`` / ``&#x...;``, semicolon optional): 0 and anything above U+10FFFF or
  a surrogate becomes U+FFFD; 0x80-0x9F map through the windows-1252 table when it has an
  entry; other code points (controls, noncharacters) are kept as the DOM keeps them.
"""

from __future__ import annotations

import re
from html.entities import html5 as _HTML5

NAMED: dict[str, str] = dict(_HTML5)

# 0x80-0x9F -> the windows-1252 character, exactly the standard's numeric replacement table.
C1: dict[int, str] = {}
for _b in range(0x80, 0xA0):
    try:
        C1[_b] = bytes([_b]).decode("cp1252")
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D: no entry, kept as is
        pass

_REF = re.compile(r"&(?:#[xX]([0-9A-Fa-f]+);?|#([0-9]+);?|([A-Za-z0-9]+;?))")


def _numeric(digits: str, base: int) -> str:
    digits = digits.lstrip("0")
    # More than 8 significant digits is out of range in either base (and int() of a huge
    # digit string is slow or refused), so do not convert it.
    cp = 0x110000 if len(digits) > 8 else int(digits or "0", base)
    if cp == 0 or cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        return "\ufffd"
    if 0x80 <= cp <= 0x9F:
        return C1.get(cp, chr(cp))
    return chr(cp)


def _replace(m: re.Match[str]) -> str:
    hexd = m.group(1)
    if hexd is not None:
        return _numeric(hexd, 16)
    dec = m.group(2)
    if dec is not None:
        return _numeric(dec, 10)
    name = m.group(3)
    value = NAMED.get(name)
    if value is not None:
        if name[-1] == ";":
            return value
        # A legacy name without ";": the run of alphanumerics ended here (the regex is
        # greedy), so only "=" can follow and make it literal.
        end = m.end()
        s = m.string
        if end < len(s) and s[end] == "=":
            return m.group(0)
        return value
    if name[-1] == ";":
        # "X;" is not a name but the legacy "X" is: ";" is neither "=" nor alphanumeric.
        value = NAMED.get(name[:-1])
        if value is not None:
            return value + ";"
    # Longest prefix of the run that is a legacy name: it is followed by an alphanumeric
    # (the rest of the run), so in an attribute value it stays literal.
    return m.group(0)


def unescape_attr(s: str) -> str:
    """Decode the character references of an attribute value as the tokenizer does."""
    if "&" not in s:
        return s
    return _REF.sub(_replace, s)
