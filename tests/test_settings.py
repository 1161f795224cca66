"""Stored settings of a crawl: what a resumed run keeps, takes, merges and refuses."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from crawler.config import KEYS, ConfigError, CrawlConfig
from crawler.core.settings import (
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
    if key == "render_sample":
        return 0.5  # (a fraction: at most 1)
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
        "render": "auto",
        "format": "jsonl",
        "output": "out.txt",
        "user_agent": "other/1.0",
        "robots_agent": "OtherBot",
        "state_sync": "full",
        "cookies": "cookies.txt",
        "save_cookies": "saved.txt",
        "auth_env": "CRAWL_AUTH",
        "bearer_env": "CRAWL_TOKEN",
        "proxy": "http://127.0.0.1:3128",
        "warc": "crawl.warc.gz",
        "metrics_host": "0.0.0.0",
        "ca_cert": "ca.pem",
        "client_cert": "client.pem",
        "client_key": "client.key",
        "client_key_password_env": "CRAWL_KEY_PASSWORD",
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
    stored_elsewhere = {"auth", "origin_auth", "origin_headers", "state", "name", "host_split"}
    assert stored_elsewhere == set(NOT_STORED)


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
    # keys that need another: a client key (and its pass phrase) go with a client certificate
    cert = {"client_cert": other_value("client_cert")}
    needs = {"client_key": cert, "client_key_password_env": cert}
    first = CrawlConfig(seeds=(SEED,), **{key: other_value(key)}, **needs.get(key, {}))
    first = first.validated()
    stored = roundtrip(first)
    expected = getattr(stored_config(stored), key)
    assert getattr(resume(stored, CrawlConfig(), given=set()), key) == expected
    given = CrawlConfig()  # the default, given explicitly (e.g. --concurrency 32)
    if key in ("auth_env", "bearer_env"):  # credentials, so that the run is not refused
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


# -- credentials: never stored, a marker instead; a resume without them is refused --

SECRET = "pw-Zq81x"


def test_credentials_are_never_stored_but_a_marker_is() -> None:
    cfg = CrawlConfig(
        seeds=(SEED, "https://other.test/a"),
        auth=f"user:{SECRET}",
        origin_auth={"https://staging.test": f"bob:{SECRET}"},
        headers=(f"X-Api-Key: {SECRET}", "Accept-Language: fr", f"Cookie: s={SECRET}"),
        proxy=f"http://me:{SECRET}@127.0.0.1:3128",
    ).validated()
    stored = roundtrip(cfg)
    assert SECRET not in json.dumps(stored)
    assert stored["run"]["headers"] == ["Accept-Language: fr"]
    assert stored["run"]["proxy"] is None
    assert stored["credentials"] == {
        "--auth": ["http://127.0.0.1:8080", "https://other.test:443"],
        "origin_auth": ["https://staging.test:443"],
        "--header": ["Cookie", "X-Api-Key"],
        "--proxy": ["http://me:***@127.0.0.1:3128"],
    }


def test_a_crawl_without_credentials_stores_no_marker() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,), headers=("Accept: text/html",)).validated())
    assert "credentials" not in stored and stored["run"]["headers"] == ["Accept: text/html"]


@pytest.mark.parametrize(
    ("first", "again", "message"),
    [
        ({"auth": "u:p"}, {}, "this crawl was started with --auth for http://127.0.0.1:8080;"),
        ({"auth_env": "CL_AUTH"}, {"auth_env": None}, "started with --auth-env for http://127"),
        (
            {"origin_auth": {"http://127.0.0.1:8080": "u:p"}},
            {},
            "this crawl was started with origin_auth for http://127.0.0.1:8080;",
        ),
        ({"headers": ("X-Api-Key: k",)}, {}, "started with --header 'X-Api-Key: ...'; give it"),
        (
            {"proxy": "http://u:p@127.0.0.1:3128"},
            {},
            "started with --proxy http://u:***@127.0.0.1:3128 (with a password); give it again",
        ),
    ],
)
def test_a_resume_without_the_credentials_is_refused_and_says_which(
    first: dict[str, Any], again: dict[str, Any], message: str
) -> None:
    from crawler.core.settings import CredentialsError  # noqa: PLC0415

    stored = roundtrip(CrawlConfig(seeds=(SEED,), **first).validated())
    with pytest.raises(CredentialsError) as info:
        resume(stored, CrawlConfig(**again).validated(), given=set(again))
    assert message in str(info.value) and str(info.value).endswith("credentials are not stored")
    assert "p@" not in str(info.value)


def test_a_resume_with_the_credentials_from_any_option_goes_on() -> None:
    stored = roundtrip(
        CrawlConfig(
            seeds=(SEED,), auth="u:p", headers=("Authorization: Bearer t", "Accept: */*")
        ).validated()
    )
    # --auth-env instead of --auth, and the credential header again: fine
    got = resume(
        stored,
        CrawlConfig(auth_env="CL_AUTH", headers=("authorization: Bearer t2",)).validated(),
        given={"auth_env", "headers"},
    )
    assert got.auth_env == "CL_AUTH" and got.headers == ("authorization: Bearer t2",)
    # per origin, in a config file, for the seed's origin written without its port: fine
    got = resume(
        stored,
        CrawlConfig(
            origin_auth={"http://127.0.0.1:8080/": "u:p"}, headers=("Authorization: x",)
        ).validated(),
        given={"origin_auth", "headers"},
    )
    assert got.origin_auth == {"http://127.0.0.1:8080/": "u:p"}


def test_a_new_seed_on_resume_gets_the_auth_of_this_run() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,)).validated())
    got = resume(stored, CrawlConfig(seeds=("https://b.test/",), auth="u:p").validated(),
                 given={"seeds", "auth"})  # fmt: skip
    assert got.auth == "u:p" and got.seeds == (SEED, "https://b.test/")
    assert roundtrip(got)["credentials"]["--auth"] == [
        "http://127.0.0.1:8080",
        "https://b.test:443",
    ]


@pytest.mark.parametrize(
    ("header", "secret"),
    [
        ("Authorization: Basic x", True),
        ("Proxy-Authorization: x", True),
        ("Cookie: a=b", True),
        ("X-Api-Key: x", True),
        ("X-Auth-Token: x", True),
        ("apikey: x", True),
        ("X-Session-Id: x", True),
        ("Accept-Language: fr", False),
        ("Referer: https://a.test/", False),
        ("X-Keyboard-Layout: us", False),
    ],
)
def test_secret_header(header: str, secret: bool) -> None:
    from crawler.core.settings import secret_header  # noqa: PLC0415

    assert secret_header(header) is secret


# -- a shared (redis://) state --

REDIS = "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize("key", ["per_host", "delay"])
def test_with_a_shared_state_politeness_is_fixed_for_the_crawl(key: str) -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,), **{key: other_value(key)}).validated())
    cfg = CrawlConfig(state=REDIS).validated()
    with pytest.raises(ConfigError) as info:
        resume(stored, cfg, given={key})
    assert info.value.key == key and "across all workers" in info.value.reason
    assert "start a new --name" in info.value.reason
    # not given: the stored value, for every worker
    assert getattr(resume(stored, cfg, given=set()), key) == other_value(key)
    # with a directory it stays per run
    assert getattr(resume(stored, CrawlConfig(state="d"), given={key}), key) == getattr(cfg, key)


def test_with_a_shared_state_a_worker_never_takes_another_machines_files(
    tmp_path: Path,
) -> None:
    first = CrawlConfig(
        seeds=(SEED,), output=str(tmp_path / "o.jsonl"), format="jsonl", warc="a.warc.gz",
        metrics_port=9100, concurrency=5, cookies="c.txt",
    ).validated()  # fmt: skip
    stored = roundtrip(first)
    got = resume(stored, CrawlConfig(state=REDIS).validated(), given=set())
    assert (got.output, got.warc, got.metrics_port, got.cookies) == (None, None, 0, None)
    assert (got.concurrency, got.format) == (5, "jsonl")  # how to crawl: the crawl's
    # a directory state: the same command again (the output appended to)
    again = resume(stored, CrawlConfig(state="d").validated(), given=set())
    assert again.output == str(tmp_path / "o.jsonl") and again.metrics_port == 9100


def test_file_keys_are_stored_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    stored = roundtrip(
        CrawlConfig(seeds=(SEED,), cookies="c.txt", save_cookies="s.txt", warc="w.warc.gz")
    )
    assert stored["run"]["cookies"] == str(tmp_path / "c.txt")
    assert stored["run"]["save_cookies"] == str(tmp_path / "s.txt")
    assert stored["run"]["warc"] == str(tmp_path / "w.warc.gz")


def test_auth_given_on_resume_replaces_a_stored_auth_env() -> None:
    stored = roundtrip(CrawlConfig(seeds=(SEED,), auth_env="CL_AUTH").validated())
    got = resume(stored, CrawlConfig(auth="u:p").validated(), given={"auth"})
    assert (got.auth, got.auth_env) == ("u:p", None)
    assert resume(stored, CrawlConfig().validated(), given=set()).auth_env == "CL_AUTH"
