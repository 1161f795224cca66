"""CrawlConfig: every setting of a crawl, its default, and its validation.

Defaults live here and only here; the CLI, the TOML loader and the library all build a
CrawlConfig, so a setting means the same thing whichever way in a user takes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from crawler._version import __version__

Scope = Literal["host", "domain", "subdomains"]
OutputFormat = Literal["urls", "jsonl", "csv"]
LinkSet = Literal["links", "resources"]

DEFAULT_USER_AGENT = f"crawler/{__version__} (+https://pypi.org/project/crawler/; link discovery bot)"


class ConfigError(ValueError):
    """A setting is unknown, of the wrong type, or out of range.

    The message names the source (file or flag), the key and the reason.
    """


@dataclass(frozen=True, slots=True)
class CrawlConfig:
    """Settings of one crawl. Zero means "no limit" for the limits below."""

    seeds: tuple[str, ...] = ()

    # -- limits --
    max_pages: int = 0
    max_depth: int = 16
    max_pages_per_host: int = 0
    max_url_length: int = 2048
    max_body_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 10

    # -- concurrency and politeness --
    concurrency: int = 32
    per_host: int = 8
    delay: float = 0.0

    # -- scope --
    scope: Scope = "host"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    sort_query: bool = False
    drop_params: tuple[str, ...] = ()

    # -- robots and nofollow --
    ignore_robots: bool = False
    sitemaps: bool = False
    respect_nofollow: bool = False

    # -- HTTP --
    user_agent: str = DEFAULT_USER_AGENT
    timeout: float = 30.0
    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    retries: int = 2
    backoff: float = 0.5
    max_retry_after: float = 60.0

    # -- extraction --
    link_set: LinkSet = "links"

    # -- output --
    format: OutputFormat = "urls"
    output: str | None = None
    all_links: bool = False
    quiet: bool = False

    # -- backend --
    frontier: Literal["memory"] = "memory"

    extra: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def validated(self) -> CrawlConfig:
        """Return a normalised copy (lists to tuples, ...) or raise ConfigError naming the key.

        Placeholder: the config issue fills in every check.
        """
        return self

    def replace(self, **changes: object) -> CrawlConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
