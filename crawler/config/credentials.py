"""Whether a crawl sends credentials: then what it writes (the WARC, ``--output``) is private.

A crawl that logs in sees what its credentials open: the WARC holds the bodies of those pages
and the site's ``Set-Cookie`` values, the outputs the URLs only a logged-in user finds. Such
files are created mode 0600 instead of following the umask (``crawler.output.files``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawler.config.checks import secret_header

if TYPE_CHECKING:
    from crawler.config.model import CrawlConfig

__all__ = ["sends_credentials"]

# The proxy variables the HTTP client honours when no ``proxy`` is given.
_PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY")


def _has_userinfo(url: str) -> bool:
    try:
        return "@" in urlsplit(url.strip()).netloc
    except ValueError:
        return False


def sends_credentials(cfg: CrawlConfig, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``cfg`` sends credentials: ``auth``/``auth_env``/``origin_auth`` (Basic),
    ``bearer_env`` (a bearer token), a credential header (``secret_header``: Authorization,
    Cookie, X-Api-Key ...), headers for named origins (``origin_headers``), a ``cookies``
    file, or a proxy with a user name or password (``proxy``, else the environment's
    ``HTTP(S)_PROXY``, read from ``environ``, default ``os.environ``)."""
    if cfg.auth or cfg.auth_env or cfg.origin_auth or cfg.cookies:
        return True
    if any(secret_header(h) for h in cfg.headers):
        return True
    if cfg.bearer_env or cfg.origin_headers:
        return True
    if cfg.proxy:
        return _has_userinfo(cfg.proxy)
    env = os.environ if environ is None else environ
    return any(_has_userinfo(env.get(name, "")) for name in _PROXY_VARS)
