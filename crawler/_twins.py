"""One rule for choosing, at import, a compiled twin or its pure-Python reference.

Every compiled accelerator (``crawler/**/_*_c.pyx``) has a pure-Python twin with the same
behaviour. The compiled one is used when it is built and ``CRAWLER_NO_EXTENSIONS`` is not set
(nor is the interpreter other than CPython). ``CRAWLER_REQUIRE_EXTENSIONS`` (CI on a machine with
a compiler) turns a missing or broken compiled module into an ImportError naming it, instead of
a silent fallback that would skip every compiled test; ``CRAWLER_NO_EXTENSIONS``, an explicit
request for the pure-Python twins, still wins.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

__all__ = ["NO_EXTENSIONS", "REQUIRE_EXTENSIONS", "compiled"]

NO_EXTENSIONS = (
    bool(os.environ.get("CRAWLER_NO_EXTENSIONS")) or sys.implementation.name != "cpython"
)
REQUIRE_EXTENSIONS = bool(os.environ.get("CRAWLER_REQUIRE_EXTENSIONS"))


def compiled(module: str, *names: str, what: str) -> tuple[Any, ...] | None:
    """``names`` of the compiled ``module``, or None: not wanted, or not built.

    Args:
        module: the compiled module's dotted name.
        names: the attributes wanted from it, returned in this order.
        what: the twin, for the ImportError under ``CRAWLER_REQUIRE_EXTENSIONS``.
    """
    if NO_EXTENSIONS:
        return None
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - the extension is optional
        if REQUIRE_EXTENSIONS:
            msg = f"CRAWLER_REQUIRE_EXTENSIONS is set but {what} failed: {exc}"
            raise ImportError(msg) from exc
        return None
    return tuple(getattr(mod, name) for name in names)
