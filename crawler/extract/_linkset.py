"""What an extractor's arguments become, the same in both twins: a ``link_set`` checked and
made hashable (`link_set_key`), the tables a tag is looked up in (`_link_config`), and the
limits (`MAX_TOKEN`, the default ``max_token``; `MAX_IDS` and `MAX_ID_CHARS` for
``collect_ids``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._headfacts import HEAD_FACT_TAGS
from ._html import _AUX, _SWITCH_NAMES, LINK_SETS
from ._states import _boring
from ._tree import _MAX_ANAME, _MAX_NAME

MAX_TOKEN = 64 * 1024
# Fragment targets (``collect_ids``): at most this many ids, of at most this many code points
# in all, are kept per document; past either, ``ids_complete`` is False.
MAX_IDS = 100_000
MAX_ID_CHARS = 4 * 1024 * 1024

_Config = tuple[
    dict[bytes, list[tuple[bytes, str]]], dict[bytes, frozenset[bytes]], dict[bytes, str], Any
]
# The attribute kept on every start tag while ids are collected.
_ID_ATTRS = frozenset((b"id",))


def _link_config(
    spec: Mapping[str, tuple[str, ...]], ids: bool = False, head: bool = False
) -> _Config:
    """Tables for one link set (built once per distinct set, shared by extractors); with
    ``ids`` every kept attribute set also has ``id`` (and ``a`` has ``name``); with ``head``
    (``head_facts``) ``link``, ``meta`` and ``base`` keep what `_headfacts` reads. (The
    data-state skipper is the set's own: while the head is read, every tag is looked at.)"""
    links: dict[bytes, list[tuple[bytes, str]]] = {}
    want: dict[bytes, frozenset[bytes]] = {}
    tagstr: dict[bytes, str] = {}
    names: list[bytes] = [*_SWITCH_NAMES, b"template"]
    for tag, attrs in spec.items():
        if not (tag.isascii() and all(a.isascii() for a in attrs)) or not tag:
            raise ValueError(f"link_set: tag and attribute names must be ASCII: {tag!r}")
        if len(tag) > _MAX_NAME or any(not a or len(a) > _MAX_ANAME for a in attrs):
            msg = f"link_set: names up to {_MAX_NAME} (tags) and {_MAX_ANAME} (attributes) bytes"
            raise ValueError(f"{msg}: {tag!r}")
        t = tag.lower().encode("ascii")
        links[t] = [(a.lower().encode("ascii"), a.lower()) for a in attrs]
        tagstr[t] = tag.lower()
        names.append(t)
    # The tree builder renames an <image> start tag in HTML content "img".
    links.pop(b"image", None)
    tagstr.pop(b"image", None)
    if b"img" in links:
        links[b"image"] = links[b"img"]
        tagstr[b"image"] = tagstr[b"img"]
        names.append(b"image")
    for t in set(links) | set(_AUX):
        want[t] = frozenset([a for a, _ in links.get(t, [])] + list(_AUX.get(t, ())))
    names.extend(_AUX)
    # <input type> decides whether an input clears the frameset-ok flag; inputs are read only
    # while that flag matters (every tag is looked at then), so input is no stop tag here.
    want[b"input"] = want.get(b"input", frozenset()) | {b"type"}
    if head:
        for t, names_kept in HEAD_FACT_TAGS.items():
            want[t] = want.get(t, frozenset()) | frozenset(names_kept)
    if ids:
        want = {t: w | _ID_ATTRS for t, w in want.items()}
        want[b"a"] = want.get(b"a", _ID_ATTRS) | {b"name"}
    # A <form> inside an open form is no element: </form> matters when forms are links.
    end_names = (b"form",) if b"form" in links else ()
    return links, want, tagstr, _boring(names, end_names, ids)


def link_set_key(link_set: str | Mapping[str, Any]) -> Any:
    """A ``link_set`` argument checked and made hashable: a preset name, or the sorted
    ``(tag, (attr, ...))`` pairs of a mapping (a lone str is one attribute name). Both
    implementations key their per-set tables on it.

    Raises:
        ValueError: an unknown preset, or not a ``{tag: [attr, ...]}`` mapping.
    """
    if isinstance(link_set, str):
        if link_set not in LINK_SETS:
            raise ValueError(f"link_set: unknown preset {link_set!r} (links, resources)")
        return link_set
    try:
        return tuple(
            sorted(
                (str(k), (v,) if isinstance(v, str) else tuple(str(a) for a in v))
                for k, v in link_set.items()
            )
        )
    except (AttributeError, TypeError) as e:
        msg = f"link_set: expected a preset name or {{tag: [attr, ...]}}: {e}"
        raise ValueError(msg) from e
