"""Stored settings of a crawl: what a resumed run keeps, takes, merges and refuses."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from crawler.config import KEYS, ConfigError, CrawlConfig
from crawler.settings import (
    CRAWL_DEFINING,
    FORMAT,
    NOT_STORED,
    PER_RUN,
    resume,
    stored_config,
    to_stored,
)
from crawler.state.base import StateError

SEED = "http://127.0.0.1:8080/"


def other_value(key: str) -> Any:
    """A valid value of ``key`` that is not its default."""
    if key == "headers":
        return ("Accept-Language: fr",)
    value = getattr(CrawlConfig(), key)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 3
    if isinstance(value, tuple):
        return ("x",)
    special = {
        "scope": "domain",
        "link_set": "resources",
        "format": "jsonl",
        "output": "out.txt",
        "user_agent": "other/1.0",
        "state_sync": "full",
        "cookies": "cookies.txt",
        "save_cookies": "saved.txt",
        "auth_env": "CRAWL_AUTH",
        "proxy": "http://127.0.0.1:3128",
        "warc": "crawl.warc.gz",
        "metrics_host": "0.0.0.0",
    }
    return special[key]


def roundtrip(cfg: CrawlConfig) -> dict[str, Any]:
    """What a state gives back: the stored dict through JSON."""
    stored: dict[str, Any] = json.loads(json.dumps(to_stored(cfg)))
    return stored


def test_every_key_is_crawl_defining_or_per_run_or_merged() -> None:
    kinds = [set(CRAWL_DEFINING), set(PER_RUN), set(NOT_STORED), {"seeds"}]
    for key in KEYS:
        assert sum(key in kind for kind in kinds) == 1, key
    assert set().union(*kinds) == set(KEYS)
    assert all(CRAWL_DEFINING.values()) and all(PER_RUN.values())  # each says why
    assert all(NOT_STORED.values())
    assert {"auth", "origin_auth", "state", "name"} == set(NOT_STORED)


def test_stored_is_json_with_a_format_and_reads_back_as_the_config() -> None:
    cfg = CrawlConfig(
        seeds=(SEED,), max_depth=3, include=("/blog/",), concurrency=4, format="jsonl"
    ).validated()
    stored = roundtrip(cfg)
    assert stored["format"] == FORMAT and stored["seeds"] == [SEED]
    assert "state" not in stored["crawl"] and "state" not in stored["run"]
    assert stored_config(stored) == cfg


def test_resume_with_nothing_given_is_the_first_run_again() -> None:
    first = CrawlConfig(
        seeds=(SEED,), max_depth=3, scope="domain", max_pages=50, format="csv", quiet=True
    ).validated()
    again = resume(roundtrip(first), CrawlConfig(state="dir"), given=set())
    assert again == first.replace(state="dir")


@pytest.mark.parametrize("key", sorted(CRAWL_DEFINING))
def test_a_crawl_defining_key_given_and_different_is_an_error_naming_it(key: str) -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,)))
    cfg = CrawlConfig(**{key: other_value(key)}).validated()
    with pytest.raises(ConfigError) as info:
        resume(stored, cfg, given={key})
    assert info.value.key == key
    assert "cannot change on resume" in info.value.reason
    # not given (say a config file default): the stored value is kept, no error
    assert getattr(resume(stored, cfg, given=set()), key) == getattr(CrawlConfig(), key)


def test_a_crawl_defining_key_given_with_the_stored_value_is_fine() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,), max_depth=3, exclude=("a", "b")))
    cfg = CrawlConfig(max_depth=3, exclude=("b", "a")).validated()  # order does not matter
    got = resume(stored, cfg, given={"max_depth", "exclude"})
    assert got.max_depth == 3 and set(got.exclude) == {"a", "b"}


def test_the_conflict_message_says_both_values_and_what_to_do() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,), scope="host"))
    with pytest.raises(ConfigError) as info:
        resume(stored, CrawlConfig(scope="domain"), given={"scope"})
    assert str(info.value).startswith('scope: this crawl was started with "host"')
    assert 'this run gives "domain"' in str(info.value)
    assert "new state directory" in str(info.value)


@pytest.mark.parametrize("key", sorted(PER_RUN))
def test_a_per_run_key_given_wins_and_one_not_given_is_the_stored_one(key: str) -> None:
    first = CrawlConfig(seeds=(SEED,), **{key: other_value(key)}).validated()
    stored = roundtrip(first)
    expected = getattr(stored_config(stored), key)
    assert getattr(resume(stored, CrawlConfig(), given=set()), key) == expected
    given = CrawlConfig()  # the default, given explicitly (e.g. --concurrency 32)
    if key == "auth_env":  # credentials, so that the run is not refused for lacking them
        given = CrawlConfig(auth="u:p")
    assert getattr(resume(stored, given, given={key}), key) == getattr(given, key)


def test_seeds_are_added_in_order_without_duplicates() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED, SEED + "a")))
    cfg = CrawlConfig(seeds=(SEED + "b", SEED)).validated()
    assert resume(stored, cfg, given={"seeds"}).seeds == (SEED, SEED + "a", SEED + "b")


def test_library_given_none_means_the_keys_that_differ_from_the_default() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,), max_depth=3, concurrency=4))
    # max_depth at its default: not given, the stored 3 stands; concurrency 8 is given
    got = resume(stored, CrawlConfig(concurrency=8), given=None)
    assert (got.max_depth, got.concurrency) == (3, 8)
    with pytest.raises(ConfigError) as info:
        resume(stored, CrawlConfig(max_depth=5), given=None)
    assert info.value.key == "max_depth"


def test_output_is_stored_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    stored = roundtrip(CrawlConfig(seeds=(SEED,), output="out.jsonl"))
    assert stored["run"]["output"] == os.path.join(str(tmp_path), "out.jsonl")
    assert roundtrip(CrawlConfig(seeds=(SEED,), output="-"))["run"]["output"] == "-"
    assert roundtrip(CrawlConfig(seeds=(SEED,)))["run"]["output"] is None


def test_another_format_or_damaged_settings_are_a_state_error() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,)))
    with pytest.raises(StateError, match=r"format 99, this version of crawler .* reads format 1"):
        resume({**stored, "format": 99}, CrawlConfig())
    with pytest.raises(StateError, match="damaged"):
        resume({"format": FORMAT, "seeds": []}, CrawlConfig())
    with pytest.raises(StateError, match="cannot be read by this version: .*max_depth"):
        resume({**stored, "crawl": {**stored["crawl"], "max_depth": -1}}, CrawlConfig())
    with pytest.raises(StateError, match="cannot be read by this version: .*unknown key"):
        resume({**stored, "run": {**stored["run"], "turbo": True}}, CrawlConfig())


def test_a_key_the_stored_settings_lack_takes_this_runs_value() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,)))
    del stored["crawl"]["link_set"], stored["run"]["retries"]
    got = resume(stored, CrawlConfig(link_set="resources", retries=5), given={"link_set"})
    assert (got.link_set, got.retries) == ("resources", 5)


def test_another_format_into_the_same_output_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    stored = roundtrip(CrawlConfig(seeds=(SEED,), format="jsonl", output="out.jsonl"))
    with pytest.raises(ConfigError) as info:
        resume(stored, CrawlConfig(format="urls"), given={"format"})  # the stored output
    assert info.value.key == "format"
    assert "holds this crawl's jsonl records" in info.value.reason
    with pytest.raises(ConfigError):  # the same file, named relatively
        resume(stored, CrawlConfig(format="csv", output="out.jsonl"), given={"format", "output"})
    # another file, or stdout: fine
    got = resume(stored, CrawlConfig(format="urls", output="o.txt"), given={"format", "output"})
    assert (got.format, got.output) == ("urls", "o.txt")
    got = resume(stored, CrawlConfig(format="urls", output="-"), given={"format", "output"})
    assert got.output == "-"
    stdout = roundtrip(CrawlConfig(seeds=(SEED,), format="jsonl"))
    assert resume(stdout, CrawlConfig(format="csv"), given={"format"}).format == "csv"
