"""The render keys: defaults, checks naming the key and the reason, flags, the config file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crawler.config import ConfigError, CrawlConfig, load_config


def test_defaults() -> None:
    cfg = CrawlConfig().validated()
    assert (cfg.render, cfg.render_concurrency, cfg.render_timeout) == ("never", 2, 5.0)
    assert cfg.render_sample == 0.0


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("render", "sometimes", "must be one of 'never', 'auto', 'always'"),
        ("render_concurrency", 0, "must be >= 1"),
        ("render_timeout", 0, "must be > 0"),
        ("render_timeout", 301, "<= 300"),
        ("render_timeout", -1, ">= 0"),
        ("render_sample", 1.5, "must be between 0 and 1"),
        ("render_sample", -0.1, ">= 0"),
    ],
)
def test_a_bad_value_names_the_key_and_why(key: str, value: object, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        CrawlConfig(**{key: value}).validated()  # type: ignore[arg-type]
    assert err.value.key == key
    assert words in str(err.value)


def test_the_config_file_takes_a_render_table(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[render]\nrender = "auto"\nrender_concurrency = 3\nrender_timeout = 2.5\n')
    cfg = load_config(str(path))
    assert (cfg.render, cfg.render_concurrency, cfg.render_timeout) == ("auto", 3, 2.5)


@pytest.mark.parametrize("command", ["crawl", "check"])
def test_the_flags_are_checked(command: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "crawler", command, "--render", "sometimes", "http://127.0.0.1:9/"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--render" in proc.stderr and "sometimes" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "crawler", command, "--render-timeout", "0", "http://127.0.0.1:9/"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "render_timeout" in proc.stderr or "--render-timeout" in proc.stderr
