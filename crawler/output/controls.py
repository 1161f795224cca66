"""Text read from elsewhere (a page, a crawl state), made safe to print on a terminal.

A raw value can hold ESC sequences that move the cursor, recolour or retitle the terminal of
whoever reads the output, BEL, or a C1 control (U+009B acts as CSI on many terminals): each
is shown as its ``\\xNN`` escape instead. Used by the check's text report and ``crawler
status``.
"""

from __future__ import annotations

__all__ = ["escape_controls"]

# C0 controls, DEL and the C1 controls.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def escape_controls(text: str) -> str:
    """``text`` with every C0 control, DEL and C1 control as its ``\\xNN`` escape."""
    return text.translate(_CONTROLS)
