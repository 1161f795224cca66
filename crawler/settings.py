"""The settings stored with a crawl's state, and how a resumed run merges them with its own.

A crawl kept in a state directory (``--state DIR``) is resumed by running it again, with the
same command or with no URL at all. Two kinds of settings:

* Crawl-defining (``CRAWL_DEFINING``): they decide WHICH URLs belong to the crawl (scope,
  include/exclude, depth, the canonical form the seen set is keyed by, ...). The state's seen
  set and queue were built under them, so a resumed run keeps the stored values; one given
  explicitly (flag or config file) that disagrees is an error naming the key, never a crawl
  that silently means two things.
* Per run (``PER_RUN``): how this run fetches and writes (concurrency, timeouts, output,
  the ``max_pages`` budget of the whole crawl, ...). A resumed run takes the stored value of
  the last run unless it gives one, and then its own wins (and is stored for the next run).
  So ``crawler crawl --state DIR`` with no URL is the first command again. One exception:
  another ``format`` into the same output file (appended to on resume) is refused.

Seeds are added: the stored ones, then the new ones. ``state`` itself is never stored.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

from crawler._version import __version__
from crawler.config import KEYS, ConfigError, CrawlConfig, as_toml_value, from_mapping
from crawler.state.base import StateError

__all__ = ["CRAWL_DEFINING", "FORMAT", "PER_RUN", "resume", "stored_config", "to_stored"]

#: Version of the stored dict; a state holding another is refused (StateError).
FORMAT = 1

#: key -> why it decides what is crawled (so it cannot change on resume).
CRAWL_DEFINING: dict[str, str] = {
    "max_depth": "a URL one hop past it is marked seen but never queued: a deeper limit later"
    " could not reach it",
    "max_pages_per_host": "a URL over its host's budget is marked seen but never queued: a"
    " higher budget later could not reach it",
    "max_url_length": "which URLs are admitted at all",
    "scope": "which hosts are in the crawl",
    "include": "which URLs are followed",
    "exclude": "which URLs are followed",
    "sort_query": "the canonical form of a URL: the seen set is keyed by it",
    "drop_params": "the canonical form of a URL: the seen set is keyed by it",
    "ignore_robots": "which URLs may be fetched",
    "sitemaps": "whether robots.txt sitemaps seed the crawl",
    "respect_nofollow": "which links are followed",
    "user_agent": "robots.txt rules are chosen by the User-Agent: it decides which URLs are"
    " allowed",
    "link_set": "which links of a page are followed",
}

#: key -> why it may differ from run to run (the stored value is the default of the next).
PER_RUN: dict[str, str] = {
    "max_pages": "the budget of the whole crawl, counted across runs: raise it to go on",
    "max_body_bytes": "a limit of one fetch (pages fetched already are not fetched again)",
    "max_redirects": "a limit of one fetch",
    "concurrency": "speed and politeness of this run",
    "per_host": "speed and politeness of this run",
    "delay": "speed and politeness of this run",
    "timeout": "how long one fetch may take",
    "connect_timeout": "how long one fetch may take",
    "read_timeout": "how long one fetch may take",
    "retries": "how hard one fetch tries",
    "backoff": "how hard one fetch tries",
    "max_retry_after": "how hard one fetch tries",
    "format": "how results are written (a resumed run appends to --output)",
    "output": "where results are written (stored as an absolute path)",
    "all_links": "what the urls format lists",
    "quiet": "what this run prints on stderr",
    "state_sync": "how durable this run's commits are",
}

# Keys kept out of both: seeds are merged, the state's location is not part of the crawl.
_NOT_STORED = frozenset({"seeds", "state"})
# Lists whose order does not change their meaning (any regex matches; a set of parameters).
_UNORDERED = frozenset({"include", "exclude", "drop_params"})


def _json(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def to_stored(cfg: CrawlConfig) -> dict[str, Any]:
    """The settings to store with a crawl (JSON-able): seeds, both kinds, a format version.

    ``output`` is stored as an absolute path, so that a resumed run started from another
    directory appends to the same file.
    """
    run: dict[str, Any] = {key: _json(getattr(cfg, key)) for key in PER_RUN}
    if cfg.output not in (None, "-"):
        run["output"] = os.path.abspath(cfg.output)
    return {
        "format": FORMAT,
        "crawler": __version__,
        "seeds": list(cfg.seeds),
        "crawl": {key: _json(getattr(cfg, key)) for key in CRAWL_DEFINING},
        "run": run,
    }


def stored_config(stored: Mapping[str, Any]) -> CrawlConfig:
    """The stored settings as a CrawlConfig (defaults for any key they lack).

    Raises:
        StateError: another format version, or values this version cannot read.
    """
    found = stored.get("format") if isinstance(stored, Mapping) else None
    if found != FORMAT:
        raise StateError(
            f"the crawl's stored settings are in format {found!r}, this version of crawler"
            f" ({__version__}) reads format {FORMAT}: use the version that started the crawl,"
            " or a new state directory"
        )
    crawl, run, seeds = stored.get("crawl"), stored.get("run"), stored.get("seeds")
    if not isinstance(crawl, dict) or not isinstance(run, dict) or not isinstance(seeds, list):
        raise StateError("the crawl's stored settings are damaged (crawl, run or seeds missing)")
    values = {k: v for k, v in {**crawl, **run}.items() if k not in _NOT_STORED}
    try:
        return from_mapping({**values, "seeds": seeds}, source="stored settings")
    except ConfigError as exc:
        raise StateError(f"the crawl's settings cannot be read by this version: {exc}") from None


def _same(key: str, a: object, b: object) -> bool:
    if key in _UNORDERED and isinstance(a, tuple) and isinstance(b, tuple):
        return sorted(set(a)) == sorted(set(b))
    return a == b


def resume(
    stored: Mapping[str, Any], cfg: CrawlConfig, given: Collection[str] | None = None
) -> CrawlConfig:
    """The config of a resumed run: the stored crawl, this run's explicit changes on top.

    Args:
        stored: what ``to_stored`` returned when the crawl was last started or resumed.
        cfg: this run's config (validated).
        given: the keys this run set explicitly (by flag or config file). None (the
            library): the keys whose value differs from the default.

    Returns:
        Crawl-defining keys as stored; per-run keys given in this run from ``cfg``, the
        others as stored; seeds: the stored ones, then the new ones of ``cfg``; ``state``
        from ``cfg``.

    Raises:
        ConfigError: a crawl-defining key was given and disagrees with the stored value
            (``key`` names it).
        StateError: the stored settings are of another format, or damaged.
    """
    old = stored_config(stored)
    base = CrawlConfig()
    if given is None:
        explicit = {k for k in KEYS if getattr(cfg, k) != getattr(base, k)}
    else:
        explicit = set(given)
    present = {**stored["crawl"], **stored["run"]}
    changes: dict[str, Any] = {}
    for key in CRAWL_DEFINING:
        if key not in present:
            continue  # a key this format's writer did not know: this run's value stands
        was, now = getattr(old, key), getattr(cfg, key)
        if key in explicit and not _same(key, was, now):
            raise ConfigError(
                f"this crawl was started with {as_toml_value(was)}, this run gives"
                f" {as_toml_value(now)}; it cannot change on resume ({CRAWL_DEFINING[key]})."
                f" Leave it out to go on with {as_toml_value(was)}, or start a new state"
                " directory",
                key=key,
            )
        changes[key] = was
    for key in PER_RUN:
        if key in present and key not in explicit:
            changes[key] = getattr(old, key)
    changes["seeds"] = tuple(dict.fromkeys((*old.seeds, *cfg.seeds)))
    merged = cfg.replace(**changes).validated()
    _check_same_file_same_format(old, merged)
    return merged


def _check_same_file_same_format(old: CrawlConfig, new: CrawlConfig) -> None:
    """A resumed run appends to its output file: refuse to append another format to it."""
    if old.output in (None, "-") or new.output in (None, "-") or old.format == new.format:
        return
    assert old.output is not None and new.output is not None
    if os.path.abspath(old.output) != os.path.abspath(new.output):
        return
    raise ConfigError(
        f"{new.output} holds this crawl's {old.format} records and a resumed crawl appends to"
        f" it; this run gives {new.format}. Give another --output for {new.format}, or leave"
        f" --format out",
        key="format",
    )
