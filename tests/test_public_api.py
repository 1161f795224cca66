"""The public API: `crawler.__all__` sorted, complete, and every name importable."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import crawler


def test_all_is_sorted_and_unique() -> None:
    assert crawler.__all__ == sorted(crawler.__all__)
    assert len(crawler.__all__) == len(set(crawler.__all__))


def test_all_is_complete() -> None:
    # every public object of ours reachable as crawler.X is in __all__ (typing helpers such
    # as Any and submodules that happen to be imported are not API names)
    public = {
        name
        for name in dir(crawler)
        if not name.startswith("_")
        and not isinstance(getattr(crawler, name), type(importlib))
        and str(getattr(getattr(crawler, name), "__module__", "")).startswith("crawler")
    }
    missing = public - set(crawler.__all__)
    assert not missing, f"public but not in __all__: {missing}"
    contract = {
        "ConfigError",
        "CrawlConfig",
        "CrawlResult",
        "CrawlStats",
        "Crawler",
        "Link",
        "LinkExtractor",
        "PageResult",
        "Sink",
        "__version__",
        "crawl",
        "crawl_sync",
        "extract_links",
    }
    assert contract <= set(crawler.__all__)


def test_every_name_imports() -> None:
    for name in crawler.__all__:
        value = getattr(crawler, name)
        assert value is not None, name
        if name != "__version__":
            assert getattr(value, "__name__", name) == name, f"crawler.{name} is {value!r}"


def test_star_import_in_a_fresh_interpreter() -> None:
    code = (
        "from crawler import *\n"
        "import crawler\n"
        "print([n for n in crawler.__all__ if n not in globals()])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        crawler.no_such_name  # noqa: B018


def test_version() -> None:
    assert crawler.__version__.count(".") == 2


def test_a_plain_crawl_imports_no_optional_dependency() -> None:
    # redis, warcio and prometheus_client are imported only by the options that use them
    # (a redis:// state, warc, metrics_port): a crawl without them pays for none.
    code = (
        "import socket, sys\n"
        "from crawler import crawl_sync\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
        "crawl_sync(f'http://127.0.0.1:{port}/', retries=0)\n"
        "mods = ('redis', 'warcio', 'prometheus_client', 'crawler.output.metrics',"
        " 'crawler.output.warc',"
        " 'crawler.state.redis')\n"
        "print(sorted(m for m in mods if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
