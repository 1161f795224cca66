"""Control characters shown as ``\\xNN`` in text that reaches a terminal or a line format.

Text read from elsewhere (a hostile page's raw value, an invalid link, a value stored in a
crawl state) may hold ESC sequences, BEL or the C1 controls (U+009B is a CSI on many
terminals): printed raw they move the cursor, recolour or retitle the terminal of whoever
reads the output, and a tab or newline breaks a line format. The crawl's ``urls`` output, the
checker's text report and ``crawler status`` escape them the same way. Ordinary non-ASCII text
is left as it is.
"""

from __future__ import annotations

__all__ = ["CONTROLS", "escape_controls"]

#: C0 controls, DEL and the C1 controls -> ``\\xNN`` (a ``str.translate`` table).
CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def escape_controls(text: str) -> str:
    """``text`` with every C0/C1 control and DEL as ``\\xNN`` (one ``translate``)."""
    return text.translate(CONTROLS)
