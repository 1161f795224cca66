"""The table of the crawl's options: each CrawlConfig key's flags, argparse arguments and help
line, in the order ``--help`` lists them (``crawler.cli.options`` adds them to a command and
reads them back).

Built on first use and cached: the ``--format`` choices come from crawler.output.sinks, which
``crawler --version`` and ``--help`` do not import.
"""

from __future__ import annotations

import argparse
from functools import cache
from typing import Any

__all__ = ["Option", "option_table"]

_BOOL = argparse.BooleanOptionalAction
Option = tuple[tuple[str, ...], dict[str, Any], str]


@cache
def option_table() -> dict[str, Option]:
    """key -> (flags, argparse kwargs, help). Every CrawlConfig key has one; "(default: X)" is
    appended from CrawlConfig so that --help cannot drift from the real defaults.

    Built on first use (``crawler.cli.options._OPTIONS`` is the same dict): the ``--format`` choices
    come from crawler.output.sinks, which ``--version`` and ``--help`` do not import.
    """
    from crawler.output.sinks import FORMATS  # noqa: PLC0415  (start-up time)

    return {
        "max_pages": (
            ("--max-pages",),
            {"type": int, "metavar": "N"},
            "stop after N pages; 0 = no limit",
        ),
        "max_depth": (
            ("--max-depth",),
            {"type": int, "metavar": "D"},
            "follow links up to D hops from a seed; 0 = no limit",
        ),
        "max_pages_per_host": (
            ("--max-pages-per-host",),
            {"type": int, "metavar": "N"},
            "at most N pages from one host; 0 = no limit",
        ),
        "max_url_length": (
            ("--max-url-length",),
            {"type": int, "metavar": "N"},
            "skip longer URLs; 0 = no limit",
        ),
        "max_body_bytes": (
            ("--max-body-bytes",),
            {"type": int, "metavar": "N"},
            "stop reading a body after N bytes (links so far are kept); 0 = no limit",
        ),
        "max_redirects": (
            ("--max-redirects",),
            {"type": int, "metavar": "N"},
            "redirect hops a URL; 0 = do not follow redirects",
        ),
        "max_time": (
            ("--max-time",),
            {"type": float, "metavar": "S"},
            "stop the run after S seconds, cleanly (outputs complete; check: the URLs not"
            " checked by then are reported so); 0 = no limit",
        ),
        "max_links_per_page": (
            ("--max-links-per-page",),
            {"type": int, "metavar": "N"},
            "handle the first N links of a page, count the rest (links_capped); 0 = no limit",
        ),
        "concurrency": (
            ("--concurrency", "-c"),
            {"type": int, "metavar": "N"},
            "requests in flight",
        ),
        "per_host": (
            ("--per-host",),
            {"type": int, "metavar": "N"},
            "requests in flight to one host (with a redis:// state: across all workers, fixed for"
            " the crawl)",
        ),
        "delay": (
            ("--delay",),
            {"type": float, "metavar": "S"},
            "seconds between requests to one host (robots.txt crawl-delay raises it; with a"
            " redis:// state: across all workers, fixed for the crawl)",
        ),
        "scope": (
            ("--scope",),
            {"choices": ("host", "origin", "domain", "subdomains")},
            "follow links on the seed's host, its exact origin (scheme too), its registrable"
            " domain, or the host and its subdomains; always on the seed's port (http 80 and"
            " https 443 count as one)",
        ),
        "include": (
            ("--include",),
            {"action": "append", "metavar": "RE"},
            "only follow URLs matching this regex (repeatable)",
        ),
        "exclude": (
            ("--exclude",),
            {"action": "append", "metavar": "RE"},
            "never follow URLs matching this regex (repeatable)",
        ),
        "sort_query": (
            ("--sort-query",),
            {"action": _BOOL},
            "sort query parameters when deduplicating",
        ),
        "drop_params": (
            ("--drop-param",),
            {"action": "append", "metavar": "NAME"},
            "remove this query parameter when deduplicating, e.g. utm_source (repeatable)",
        ),
        "ignore_robots": (("--ignore-robots",), {"action": _BOOL}, "do not obey robots.txt"),
        "sitemaps": (("--sitemaps",), {"action": _BOOL}, "also seed from robots.txt sitemaps"),
        "respect_nofollow": (
            ("--respect-nofollow",),
            {"action": _BOOL},
            'do not follow rel="nofollow" links and pages with meta robots nofollow',
        ),
        "robots_agent": (
            ("--robots-agent",),
            {"metavar": "TOKEN"},
            "product token robots.txt groups are matched by, case-insensitively (RFC 9309)",
        ),
        "user_agent": (("--user-agent",), {"metavar": "UA"}, "User-Agent header"),
        "timeout": (
            ("--timeout",),
            {"type": float, "metavar": "S"},
            "total seconds a request; 0 = no limit",
        ),
        "connect_timeout": (
            ("--connect-timeout",),
            {"type": float, "metavar": "S"},
            "seconds to connect",
        ),
        "read_timeout": (
            ("--read-timeout",),
            {"type": float, "metavar": "S"},
            "seconds without data before giving up",
        ),
        "retries": (
            ("--retries",),
            {"type": int, "metavar": "N"},
            "retries for connection errors, 429 and 5xx",
        ),
        "backoff": (
            ("--backoff",),
            {"type": float, "metavar": "S"},
            "first retry delay, doubled each retry",
        ),
        "max_retry_after": (
            ("--max-retry-after",),
            {"type": float, "metavar": "S"},
            "longest Retry-After honoured",
        ),
        "headers": (
            ("--header", "-H"),
            {"action": "append", "metavar": "'NAME: VALUE'"},
            "send this request header (repeatable)",
        ),
        "cookies": (
            ("--cookies",),
            {"metavar": "FILE"},
            "load this Netscape/Mozilla cookies.txt into the crawl's cookie jar",
        ),
        "save_cookies": (
            ("--save-cookies",),
            {"metavar": "FILE"},
            "write the cookie jar to FILE (cookies.txt) when the crawl ends",
        ),
        "auth": (
            ("--auth",),
            {"metavar": "USER:PASSWORD"},
            "HTTP Basic credentials, sent only to the seeds' origins; never stored or printed",
        ),
        "auth_env": (
            ("--auth-env",),
            {"metavar": "VAR"},
            "like --auth, read from environment variable VAR (keeps the secret off the command"
            " line)",
        ),
        "origin_headers": (
            ("--header-for",),
            {"action": "append", "nargs": 2, "metavar": ("ORIGIN", "'NAME: VALUE'")},
            "send this header to ORIGIN (scheme://host[:port]) only, whatever its name"
            " (repeatable); never stored or printed",
        ),
        "bearer_env": (
            ("--bearer-env",),
            {"metavar": "VAR"},
            "send 'Authorization: Bearer TOKEN', TOKEN read from environment variable VAR, to"
            " the seeds' origins only",
        ),
        "proxy": (
            ("--proxy",),
            {"metavar": "URL"},
            "send every request through this http://HOST:PORT proxy (overrides HTTP_PROXY,"
            " HTTPS_PROXY and NO_PROXY, which are honoured without it)",
        ),
        "insecure": (
            ("--insecure", "-k"),
            {"action": _BOOL},
            "do not verify TLS certificates or host names (a staging site, a self-signed"
            " certificate); said once on stderr",
        ),
        "ca_cert": (
            ("--ca-cert",),
            {"metavar": "FILE"},
            "trust the CA certificates of this PEM bundle INSTEAD of the system's store (as curl's"
            " --cacert)",
        ),
        "client_cert": (
            ("--client-cert",),
            {"metavar": "FILE"},
            "present this PEM client certificate (mutual TLS); FILE may hold its key too",
        ),
        "client_key": (
            ("--client-key",),
            {"metavar": "FILE"},
            "the PEM private key of --client-cert, when it is in a file of its own",
        ),
        "client_key_password_env": (
            ("--client-key-password-env",),
            {"metavar": "VAR"},
            "read the passphrase of an encrypted client key from environment variable VAR",
        ),
        "exclude_private": (
            ("--exclude-private",),
            {"action": _BOOL},
            "never connect to a private address (10/8, 172.16/12, 192.168/16, 100.64/10,"
            " fc00::/7), checked on the resolved address; the seeds' host:port are allowed",
        ),
        "exclude_link_local": (
            ("--exclude-link-local",),
            {"action": _BOOL},
            "never connect to a link-local address (169.254/16: cloud metadata; fe80::/10);"
            " crawler check refuses them unless --allow-link-local",
        ),
        "exclude_loopback": (
            ("--exclude-loopback",),
            {"action": _BOOL},
            "never connect to a loopback address (127/8, ::1, 0.0.0.0, ::)",
        ),
        "link_set": (
            ("--link-set",),
            {"choices": ("links", "resources")},
            "which links to extract: navigational links, or also resources (img, script, ...)",
        ),
        "render": (
            ("--render",),
            {"choices": ("never", "auto", "always")},
            "load HTML pages in headless Chromium for the links their scripts make: never;"
            " auto: the pages that look client-rendered (an empty app mount point, mostly"
            " script, a <noscript> asking for JavaScript, a client router's data); always"
            " (needs the 'render' extra and Chromium)",
        ),
        "render_concurrency": (
            ("--render-concurrency",),
            {"type": int, "metavar": "N"},
            "pages rendered at once in the browser",
        ),
        "render_timeout": (
            ("--render-timeout",),
            {"type": float, "metavar": "S"},
            "seconds a page may take in the browser; the links seen by then count, the page"
            " gets error render_timeout",
        ),
        "render_sample": (
            ("--render-sample",),
            {"type": float, "metavar": "RATE"},
            "with --render auto: render this fraction (0-1) of the pages the rule would not,"
            " to check it (render_reason sample; render_misses: those with links only their"
            " scripts made)",
        ),
        "format": (
            ("--format", "-f"),
            {"choices": FORMATS},
            "output format (sitemap: a sitemaps.org XML sitemap of the in-scope HTML pages that"
            " answered 200)",
        ),
        "output": (("--output", "-o"), {"metavar": "FILE"}, "write results to FILE"),
        "all_links": (
            ("--all-links",),
            {"action": _BOOL},
            "urls format: also list out-of-scope, non-HTTP and invalid links, tab-marked"
            " external/other/invalid",
        ),
        "quiet": (("--quiet", "-q"), {"action": _BOOL}, "no progress and no summary on stderr"),
        "warc": (
            ("--warc",),
            {"metavar": "FILE"},
            "also archive every response to FILE, a WARC 1.1 file (.warc.gz), written as"
            " FILE.open and renamed at the end (after a kill: crawler warc repair FILE)",
        ),
        "state": (
            ("--state",),
            {"metavar": "DIR|URL"},
            "keep the crawl's state in DIR (SQLite): the same command again, or with no URL,"
            " continues the crawl where it stopped, even after kill -9; or in Redis at"
            " redis://HOST:PORT/DB, shared by every worker given it (with no URL: join the crawl)",
        ),
        "state_sync": (
            ("--state-sync",),
            {"choices": ("normal", "full")},
            "how the state commits: normal survives kill -9, full also a power loss (an fsync a"
            " commit)",
        ),
        "name": (
            ("--name",),
            {"metavar": "NAME"},
            "with a redis:// state: the crawl's name, so that several crawls share one database",
        ),
        "lease_timeout": (
            ("--lease-timeout",),
            {"type": float, "metavar": "S"},
            "with a redis:// state: seconds before a dead worker's requests go back to the queue;"
            " 0 = automatic: 3 x --timeout, at least 60",
        ),
        "host_split": (
            ("--host-split",),
            {"type": int, "metavar": "K"},
            "with a redis:// state: split each host into K parts (each its share of --per-host,"
            " --delay and --max-pages-per-host) so that K workers crawl one site; fixed when the"
            " crawl is created; 0 = automatic: min(--per-host, 16) when the seeds are one host"
            " and no --max-pages-per-host is set, else 1",
        ),
        "metrics_port": (
            ("--metrics-port",),
            {"type": int, "metavar": "PORT"},
            "serve Prometheus metrics on http://HOST:PORT/metrics; 0 = off",
        ),
        "metrics_host": (
            ("--metrics-host",),
            {"metavar": "HOST"},
            "the address --metrics-port binds",
        ),
        "metrics_linger": (
            ("--metrics-linger",),
            {"type": float, "metavar": "S"},
            "keep serving /metrics S seconds after the crawl ends, for a last scrape of the final"
            " values (Ctrl-C cuts it short)",
        ),
    }
