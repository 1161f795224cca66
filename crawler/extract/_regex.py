"""Possessive quantifiers written as atomic groups, for CPython 3.11.0-3.11.4.

The tokenizer's patterns use possessive quantifiers (``X*+``): they never backtrack, which
keeps the scans linear. CPython before 3.11.5 mis-matches some of them (gh-100061,
gh-106052; Debian 12 ships 3.11.2, where ``<a href=x>`` then yields no link at all).
``(?>X*)`` means the same and works on every 3.11, but costs about 30% more in the
data-state skipper, so the patterns are written with ``*+`` and compiled through
:func:`compile_pattern`, which rewrites each ``X*+``, ``X++``, ``X?+`` and ``X{m,n}+`` into
``(?>X*)`` and so on only on the affected versions. The tests check on every version that
both forms match alike.
"""

from __future__ import annotations

import re
import sys

#: True where possessive quantifiers are unreliable and the atomic form is compiled instead.
POSSESSIVE_BROKEN = sys.version_info < (3, 11, 5)

_QUANT = frozenset(b"*+?")


def _class_end(p: bytes, i: int) -> int:
    """Index just past the character class that starts at ``p[i] == '['``."""
    j = i + 1
    if p[j : j + 1] == b"^":
        j += 1
    if p[j : j + 1] == b"]":
        j += 1
    while p[j] != 0x5D:  # ]
        j += 2 if p[j] == 0x5C else 1  # backslash escapes one byte
    return j + 1


def _group_end(p: bytes, i: int) -> int:
    """Index just past the group that starts at ``p[i] == '('``."""
    depth = 0
    j = i
    while True:
        c = p[j]
        if c == 0x5C:
            j += 2
            continue
        if c == 0x5B:
            j = _class_end(p, j)
            continue
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1


def atomize(p: bytes) -> bytes:
    """``p`` with every possessive quantifier replaced by an atomic group."""
    out = bytearray()
    last = -1  # where the last atom starts in ``out``, -1 when there is none to quantify
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == 0x5C:  # \x
            last = len(out)
            out += p[i : i + 2]
            i += 2
        elif c == 0x5B:  # [...]
            j = _class_end(p, i)
            last = len(out)
            out += p[i:j]
            i = j
        elif c == 0x28:  # (...)
            j = _group_end(p, i)
            last = len(out)
            out += b"(" + atomize(p[i + 1 : j - 1]) + b")"
            i = j
        elif c in _QUANT or c == 0x7B:  # *, +, ?, {m,n}
            j = p.index(b"}", i) + 1 if c == 0x7B else i + 1
            if p[j : j + 1] == b"+" and last >= 0:
                out[last:] = b"(?>" + out[last:] + p[i:j] + b")"
                j += 1
            else:
                out += p[i:j]
            last = -1
            i = j
        else:
            if c == 0x7C:  # |
                last = -1
            else:
                last = len(out)
            out.append(c)
            i += 1
    return bytes(out)


def compile_pattern(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]:
    """``re.compile``, with possessive quantifiers made atomic where CPython needs it."""
    return re.compile(atomize(pattern) if POSSESSIVE_BROKEN else pattern, flags)
