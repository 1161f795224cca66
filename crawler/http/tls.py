"""aiohttp without its import-time TLS contexts: none is built until an https request needs one.

``aiohttp.connector`` builds its two default ``ssl.SSLContext`` objects when it is imported
(``_SSL_CONTEXT_VERIFIED`` and ``_SSL_CONTEXT_UNVERIFIED``); each loads the system's CA bundle,
about 50 ms apiece on the benchmark machine, a quarter of ``crawler crawl``'s start-up, spent
even when every URL of the crawl is http. Importing this module before aiohttp makes both
placeholders instead, and the one a request asks for is built by aiohttp's own
``_make_ssl_context`` on the first https request that needs it (then kept, as aiohttp keeps
it: one a process), so an http-only crawl builds no TLS context at all.

How, and why it cannot change what aiohttp does:

* While ``import aiohttp`` runs, ``ssl.SSLContext.__new__`` returns a :class:`_Deferred`
  placeholder only when called from ``aiohttp.connector._make_ssl_context`` (directly, or
  through ``ssl.create_default_context``) in the importing thread; every other caller gets a
  real context. The original ``__new__`` is back when the import ends.
* ``TCPConnector._get_ssl_context`` (the one place aiohttp reads those two globals) is wrapped:
  a placeholder it would return is replaced, there and in ``aiohttp.connector``, by the real
  context ``_make_ssl_context`` builds, before anyone sees it.
* Should an aiohttp release lay this out differently (other names, a placeholder anywhere else
  in its modules), both contexts are built at once, as aiohttp itself does: slower, never
  wrong. ``DEFERRED`` says whether the deferral is in effect; tests/test_startup.py checks it.

If aiohttp was imported before this module (by an application, a test), its contexts exist
already and nothing is changed.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

__all__ = ["DEFERRED", "built_contexts"]

_CONNECTOR = "aiohttp.connector"
_NAMES = {"_SSL_CONTEXT_VERIFIED": True, "_SSL_CONTEXT_UNVERIFIED": False}


class _Deferred:
    """Stands for one of aiohttp's default contexts until a request needs it.

    Takes whatever ``_make_ssl_context`` and ``ssl.create_default_context`` do to a new
    context (attributes set, methods called) and forgets it: the real context is made by
    ``_make_ssl_context`` again when needed.
    """

    options = 0
    verify_mode = 0

    def __init__(self, verified: bool) -> None:
        self.verified = verified  # made by create_default_context (else SSLContext(...))

    def __getattr__(self, name: str) -> Any:
        return _ignore


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


def _caller() -> str | None:
    """``"verified"`` or ``"unverified"`` when the context being made is one of
    ``aiohttp.connector._make_ssl_context``'s, else None."""
    try:
        frame = sys._getframe(2)  # (0: here, 1: the patched __new__, 2: who made the context)
    except ValueError:  # called from C with no Python caller
        return None
    via_default = frame.f_code.co_name == "create_default_context"
    if via_default:
        frame = frame.f_back  # type: ignore[assignment]
    if (
        frame is not None
        and frame.f_code.co_name == "_make_ssl_context"
        and frame.f_globals.get("__name__") == _CONNECTOR
    ):
        return "verified" if via_default else "unverified"
    return None


def _import_aiohttp() -> bool:
    """Import aiohttp with its default contexts deferred; True if they are."""
    if _CONNECTOR in sys.modules or "aiohttp" in sys.modules:
        return False
    import ssl  # noqa: PLC0415

    cls = ssl.SSLContext
    original = cls.__dict__.get("__new__")
    if not isinstance(original, staticmethod):  # another ssl module: import as it is
        import aiohttp  # noqa: F401, PLC0415

        return False
    thread = threading.get_ident()

    def deferred_new(klass: type, *args: Any, **kwargs: Any) -> Any:
        if klass is cls and threading.get_ident() == thread:
            made_by = _caller()
            if made_by is not None:
                return _Deferred(made_by == "verified")
        return original.__func__(klass, *args, **kwargs)

    cls.__new__ = staticmethod(deferred_new)  # type: ignore[assignment]
    try:
        import aiohttp  # noqa: F401, PLC0415
    finally:
        cls.__new__ = original  # type: ignore[method-assign]
    return _install()


def _install() -> bool:
    connector = sys.modules.get(_CONNECTOR)
    if connector is None:
        return False
    tcp = getattr(connector, "TCPConnector", None)
    get = getattr(tcp, "_get_ssl_context", None)
    known = {f"{_CONNECTOR}.{name}" for name in _NAMES}
    where = {w for places in _placeholders().values() for w in places}
    if (
        get is None
        or where != known
        or any(
            getattr(connector, name).verified is not verified for name, verified in _NAMES.items()
        )
    ):
        _build_all()  # not the layout known: aiohttp's own behaviour, built now
        return False

    def _get_ssl_context(self: Any, req: Any) -> Any:
        context = get(self, req)
        if isinstance(context, _Deferred):
            context = _build(context)
        return context

    _get_ssl_context.__doc__ = get.__doc__
    _get_ssl_context.__wrapped__ = get  # type: ignore[attr-defined]
    tcp._get_ssl_context = _get_ssl_context  # type: ignore[union-attr]
    return True


def _placeholders() -> dict[_Deferred, list[str]]:
    """Every placeholder held by a module attribute of aiohttp -> where ("module.name")."""
    found: dict[_Deferred, list[str]] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "aiohttp" or name.startswith("aiohttp.")):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, _Deferred):
                found.setdefault(value, []).append(f"{name}.{attr}")
    return found


_lock = threading.Lock()
_built: dict[_Deferred, Any] = {}


def _build(placeholder: _Deferred) -> Any:
    """The real context ``placeholder`` stands for (aiohttp's ``_make_ssl_context``), put in
    its place wherever aiohttp holds it; built once, a second caller gets the same one."""
    with _lock:
        context = _built.get(placeholder)
        if context is None:
            make = sys.modules[_CONNECTOR]._make_ssl_context
            context = _built[placeholder] = make(placeholder.verified)
            for place in _placeholders().get(placeholder, []):
                module, _, attr = place.rpartition(".")
                setattr(sys.modules[module], attr, context)
        return context


def _build_all() -> None:
    for placeholder in list(_placeholders()):
        _build(placeholder)


def built_contexts() -> list[str]:
    """The names of aiohttp's default contexts that exist now (for tests and benchmarks)."""
    connector = sys.modules.get(_CONNECTOR)
    if connector is None:
        return []
    return [n for n in _NAMES if not isinstance(getattr(connector, n, None), _Deferred)]


#: True when aiohttp was imported here with its default TLS contexts deferred.
DEFERRED: bool = _import_aiohttp()
