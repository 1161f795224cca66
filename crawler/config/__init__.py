"""CrawlConfig: every setting of a crawl, its default, and its validation.

Defaults live here and only here; the CLI, the TOML loader and the library all build a
CrawlConfig, so a setting means the same thing whichever way in a user takes.

A TOML file holds the same keys as the dataclass fields, either at the top level or inside a
table named after their group (``[limits]``, ``[http]`` ...: the groups of ``crawler crawl
--help``, see ``GROUPS``). Every error names the source (file or flag), the key and the reason.

``crawler.config`` is the public path of every name below. The modules:

- ``model``: the CrawlConfig dataclass, its defaults, the groups of keys;
- ``checks``: ConfigError, each key's check, and the checks of one value (seed, header, proxy,
  Redis URL) that the CLI and the HTTP client also use;
- ``toml``: config files read into a CrawlConfig, and values rendered as TOML.

May import: nothing of the project but ``crawler._version``.
"""

from __future__ import annotations

from crawler.config.checks import (
    ConfigError,
    header_problem,
    is_redis_url,
    proxy_problem,
    redact_url,
    redis_url_problem,
    secret_header,
    seed_problem,
)
from crawler.config.model import DEFAULT_USER_AGENT, GROUPS, KEYS, REMOVED, CrawlConfig, defaults
from crawler.config.toml import as_toml_value as as_toml_value  # public path, not in __all__
from crawler.config.toml import from_mapping, load_config, load_toml

__all__ = [
    "DEFAULT_USER_AGENT",
    "GROUPS",
    "KEYS",
    "REMOVED",
    "ConfigError",
    "CrawlConfig",
    "defaults",
    "from_mapping",
    "header_problem",
    "is_redis_url",
    "load_config",
    "load_toml",
    "proxy_problem",
    "redact_url",
    "redis_url_problem",
    "secret_header",
    "seed_problem",
]
