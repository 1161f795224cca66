"""The tokenizer's states, and the patterns the pure-Python one jumps through them with.

The state numbers are shared: the compiled twin (`_extract_c.pyx`) declares the same values
(its ``DEF S_*``, ``TS_*``, ``E_*``) and reads `_SWITCH`. The patterns are the reference's
(`_machine`): each state is one compiled regular expression that jumps to where that state
ends, written with possessive quantifiers (`_regex.compile_pattern`); `_boring` builds the
data-state skipper of one link set (`_linkset._link_config`). (`_machine` binds the patterns
it calls methods on by assignment, not by import: see the note there.)
"""

from __future__ import annotations

import re

from ._html import _RAWTEXT_NAMES
from ._regex import compile_pattern

# Main states.
S_DATA = 0
S_TAG = 1
S_COMMENT_START = 2
S_COMMENT = 3
S_BOGUS = 4
S_CDATA = 5
S_RAWTEXT = 6
S_SCRIPT = 7
S_SCRIPT_ESC = 8
S_SCRIPT_DESC = 9
S_PLAINTEXT = 10
S_DEAD = 11

# Streaming tag sub-states.
TS_NAME = 0
TS_ATTRS = 1
TS_ANAME = 2
TS_AFTER_NAME = 3
TS_BEFORE_VALUE = 4
TS_DQ = 5
TS_SQ = 6
TS_UNQ = 7

# Encoding decision.
E_UNDECIDED = 0
E_BYTES = 1
E_TRANSCODE = 2
E_REPLACEMENT = 3

_WS = rb"\t\n\f\r "
_ATTRS = (
    rb"(?:[" + _WS + rb"/]*+[^" + _WS + rb"/>][^" + _WS + rb"/=>]*+"
    rb"(?>[" + _WS + rb"]*+=[" + _WS + rb"]*+(?>\"[^\"]*+\"?+|'[^']*+'?+|[^" + _WS + rb">]*+))?+)*+"
)
# A whole tag: (1) "/" for an end tag, (2) its name, (3) its attributes.
_TAG_SRC = rb"<(/?)([A-Za-z][^" + _WS + rb"/>]*+)(" + _ATTRS + rb")[" + _WS + rb"/]*+>"
_TAG = compile_pattern(_TAG_SRC)
_ATTR = compile_pattern(
    rb"[" + _WS + rb"/]*+([^" + _WS + rb"/>][^" + _WS + rb"/=>]*+)"
    rb"(?:[" + _WS + rb"]*+=[" + _WS + rb"]*+(?:\"([^\"]*+)\"|'([^']*+)'|([^" + _WS + rb">]*+)))?+"
)
# Attributes certainly complete: a closing quote, or a character that ends the name or the
# unquoted value (a name followed only by spaces may still get "=value" from the next chunk).
_COMPLETE_ATTRS = compile_pattern(
    rb"(?:[" + _WS + rb"/]*+[^" + _WS + rb"/>][^" + _WS + rb"/=>]*+"
    rb"(?>[" + _WS + rb"]*+=[" + _WS + rb"]*+"
    rb"(?>\"[^\"]*+\"|'[^']*+'|(?![\"'])[^" + _WS + rb">]*+(?=[" + _WS + rb">]))"
    rb"|(?=[" + _WS + rb"]*+[^" + _WS + rb"=])))*+"
)
_COMMENT_END = compile_pattern(rb"--!?>")
_SKIP_WS = compile_pattern(rb"[" + _WS + rb"]*+")
_SKIP_WS_SLASH = compile_pattern(rb"[" + _WS + rb"/]*+")
_NAME_CHARS = compile_pattern(rb"[^" + _WS + rb"/>]*+")
_ANAME_CHARS = compile_pattern(rb"[^" + _WS + rb"/=>]*+")
_UNQ_CHARS = compile_pattern(rb"[^" + _WS + rb">]*+")
_SCRIPT_DATA = compile_pattern(rb"<!--|</(?i:script)[" + _WS + rb"/>]")
_SCRIPT_ESC = compile_pattern(rb"-->|</(?i:script)[" + _WS + rb"/>]|<(?i:script)[" + _WS + rb"/>]")
_SCRIPT_DESC = compile_pattern(rb"-->|</(?i:script)[" + _WS + rb"/>]")

_RAWTEXT_END = {n: compile_pattern(rb"</(?i:" + n + rb")[" + _WS + rb"/>]") for n in _RAWTEXT_NAMES}
# Start tags (in HTML content) that switch the tokenizer state.
_SWITCH = dict.fromkeys(_RAWTEXT_NAMES, S_RAWTEXT)
_SWITCH[b"script"] = S_SCRIPT
_SWITCH[b"plaintext"] = S_PLAINTEXT
_COMMON = (
    rb"[^<]++"
    rb"|<+(?=[^A-Za-z!/?])"
    rb"|<!--(?>>|->|(?s:.*?)--!?>)"
    rb"|<\?[^>]*+>"
)


# The rest of a complete tag after its first letter: name, attributes, end.
_TAG_REST = rb"[^" + _WS + rb"/>]*+" + _ATTRS + rb"[" + _WS + rb"/]*+>"


def _boring(
    names: list[bytes], end_names: tuple[bytes, ...] = (), every_start: bool = False
) -> re.Pattern[bytes]:
    """The data-state skipper for HTML content: stops only at start tags named in ``names``
    (and end tags named in ``end_names``); with ``every_start`` at every start tag (ids are
    collected: any element may have one)."""
    uniq: list[bytes] = sorted(set(names), key=len, reverse=True)
    alt = b"|".join([re.escape(n) for n in uniq])
    not_named = rb"(?!(?i:" + alt + rb")[" + _WS + rb"/>])"
    not_end = b""
    if end_names:
        ealt = b"|".join([re.escape(n) for n in end_names])
        not_end = rb"(?!(?i:" + ealt + rb")[" + _WS + rb"/>])"
    end_tag = rb"</(?:>|(?![A-Za-z])[^>]*+>|" + not_end + rb"[A-Za-z]" + _TAG_REST + rb")"
    start_tag = rb"<" + not_named + rb"[A-Za-z]" + _TAG_REST
    if every_start:
        return compile_pattern(rb"(?:" + _COMMON + rb"|<!(?!--)[^>]*+>|" + end_tag + rb")*+")
    return compile_pattern(
        rb"(?:" + _COMMON + rb"|<!(?!--)[^>]*+>|" + end_tag + rb"|" + start_tag + rb")*+"
    )


# In foreign content every tag matters (the element stack), and CDATA sections exist.
_FOREIGN_SKIP = rb"(?:" + _COMMON + rb"|<!(?!--|\[CDATA\[)[^>]*+>)*+"
_BORING_FOREIGN = compile_pattern(_FOREIGN_SKIP)
# While a <frameset> could take effect: only whitespace, comments and doctypes are skipped.
# (A NUL is dropped by the tree builder wherever it is, and creates no body either.)
_TRACK_SKIP_SRC = (
    rb"(?:[\x00" + _WS + rb"]++|<!--(?>>|->|(?s:.*?)--!?>)|<\?[^>]*+>|<!(?!--|\[CDATA\[)[^>]*+>)*+"
)
_TRACK_SKIP = compile_pattern(_TRACK_SKIP_SRC)
# Foreign content, one regex run a tag (`_machine.LinkExtractor._foreign_tags`): the skipper,
# then the whole tag it stopped at, groups as in `_TAG` (none: it stopped at something else).
_FOREIGN_STEP = compile_pattern(_FOREIGN_SKIP + rb"(?:" + _TAG_SRC + rb")?+")
_FOREIGN_STEP_TRACK = compile_pattern(_TRACK_SKIP_SRC + rb"(?:" + _TAG_SRC + rb")?+")
# Attributes with no "id" in them hold no fragment target (a foreign element has no other).
_HAS_ID = compile_pattern(rb"[iI][dD]")
