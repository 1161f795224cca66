"""CrawlConfig validation and TOML loading: errors name the source, the key and the reason."""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from pathlib import Path

import pytest

from crawler.config import (
    GROUPS,
    KEYS,
    ConfigError,
    CrawlConfig,
    defaults,
    from_mapping,
    load_config,
    load_toml,
    seed_problem,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "config.example.toml"


def write(tmp_path: Path, text: str, name: str = "crawl.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the defaults and the example file --


def test_keys_are_every_field_but_extra() -> None:
    fields = [f.name for f in dataclasses.fields(CrawlConfig) if f.name != "extra"]
    assert sorted(KEYS) == sorted(fields)
    assert len(KEYS) == len(set(KEYS)), "a key is in two groups"


def test_defaults_validate_unchanged() -> None:
    config = CrawlConfig()
    assert config.validated() == config
    assert defaults()["concurrency"] == 32


def test_example_file_documents_every_key_with_its_default() -> None:
    values = load_toml(EXAMPLE)
    base = CrawlConfig()
    # Keys whose default is None (output: stdout, state: memory, cookies, auth ...) have no
    # TOML value to show: the example comments them.
    unset = {k for k in KEYS if getattr(base, k) is None}
    assert {"output", "state", "auth", "proxy", "warc", "name"} <= unset
    assert set(values) == set(KEYS) - unset
    for key, value in values.items():
        expected = getattr(base, key)
        got = tuple(value) if isinstance(value, list) else value
        assert got == expected, f"config.example.toml: {key} = {value!r}, default is {expected!r}"
    assert from_mapping(values, source=str(EXAMPLE)) == base


def test_example_file_groups_as_the_cli_and_comments_each_key() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    tables = re.findall(r"^\[(\w+)\]$", text, flags=re.M)
    assert tables == list(GROUPS)
    for key in KEYS:
        line = re.search(rf"^#? ?{key} = .*$", text, flags=re.M)
        assert line, f"{key} missing from config.example.toml"
        assert "#" in line.group(0).split("=", 1)[1], f"{key} has no comment"
    data = tomllib.loads(text)
    for group, keys in GROUPS.items():
        assert set(data[group]) <= set(keys)


# -- loading --


def test_flat_and_grouped_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'max_pages = 5\nseeds = ["https://example.org/"]\n'
        '[http]\nretries = 0\ntimeout = 3\n[scope]\ninclude = ["/docs/"]\n',
    )
    config = from_mapping(load_toml(path), source=str(path))
    assert config.max_pages == 5
    assert config.retries == 0
    assert config.timeout == 3.0 and isinstance(config.timeout, float)
    assert config.include == ("/docs/",)
    assert config.seeds == ("https://example.org/",)


def test_scope_and_output_are_both_a_group_and_a_key(tmp_path: Path) -> None:
    path = write(tmp_path, 'scope = "domain"\noutput = "out.txt"\n')
    assert load_toml(path) == {"scope": "domain", "output": "out.txt"}
    path = write(tmp_path, '[scope]\nscope = "subdomains"\n[output]\noutput = "x.csv"\n')
    assert load_toml(path) == {"scope": "subdomains", "output": "x.csv"}


def test_overrides_beat_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "max_pages = 500\nconcurrency = 4\n[output]\nformat = 'csv'\n")
    config = load_config(path, {"max_pages": 50, "format": "jsonl"})
    assert (config.max_pages, config.concurrency, config.format) == (50, 4, "jsonl")


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("max_page = 5\n", "max_page", "unknown key (did you mean 'max_pages'?)"),
        ("[limits]\nfoo = 1\n", "limits.foo", "unknown key"),
        ("[http]\nmax_pages = 1\n", "http.max_pages", "belongs in [limits], not [http]"),
        ("max_pages = 1\n[limits]\nmax_pages = 2\n", "limits.max_pages", "given twice"),
        ("[nope]\nx = 1\n", "nope", "unknown key"),
        ("max_pages = '10'\n", "max_pages", "must be an integer; got a string ('10')"),
        ("max_pages = true\n", "max_pages", "must be an integer; got a boolean"),
        ("max_pages = 1.5\n", "max_pages", "must be an integer; got a number"),
        ("max_pages = -1\n", "max_pages", "must be >= 0; got -1"),
        ("concurrency = -4\n", "concurrency", "must be >= 1; got -4"),
        ("concurrency = 0\n", "concurrency", "must be >= 1; got 0"),
        ("per_host = 0\n", "per_host", "must be >= 1"),
        ("delay = -0.5\n", "delay", "must be a finite number >= 0; got -0.5"),
        ("timeout = nan\n", "timeout", "must be a finite number >= 0; got nan"),
        ("timeout = inf\n", "timeout", "must be a finite number >= 0; got inf"),
        ("delay = 'fast'\n", "delay", "must be a number; got a string"),
        ("ignore_robots = 'yes'\n", "ignore_robots", "must be true or false; got a string"),
        ("scope = 'planet'\n", "scope", "must be one of 'host', 'origin', 'domain', 'subdomains'"),
        ("format = 'xml'\n", "format", "must be one of 'urls', 'jsonl', 'csv'"),
        ("include = '/docs/'\n", "include", "must be a list of strings; got a string"),
        ("include = ['ok', '(']\n", "include", "item 1 is not a valid regular expression ('('"),
        ("exclude = ['[a-']\n", "exclude", "not a valid regular expression"),
        ("drop_params = ['']\n", "drop_params", "item 0 must be a non-empty parameter name"),
        ("seeds = [1]\n", "seeds", "item 0 must be a string; got an integer"),
        ("seeds = ['ftp://x.org/']\n", "seeds", "'ftp://x.org/' is not an http(s) URL"),
        (
            "seeds = ['example.org']\n",
            "seeds",
            "'example.org' is not an http(s) URL (did you mean 'https://example.org'?)",
        ),
        ("seeds = ['http:///path']\n", "seeds", "'http:///path' has no host"),
        ("seeds = ['http://[::1/']\n", "seeds", "is not a valid URL"),
        ("user_agent = ''\n", "user_agent", "must be a non-empty single line"),
        ('user_agent = "a\\r\\nX-Evil: 1"\n', "user_agent", "must be a non-empty single line"),
        ("output = ''\n", "output", "must be a file name"),
        ("output = 3\n", "output", "must be a file name"),
        ("state = ''\n", "state", "must be a directory or a redis:// URL (a non-empty string)"),
        ("state = 7\n", "state", "must be a directory or a redis:// URL"),
        ("[backend]\nname = 'a b'\n", "name", "must be 1-64 letters"),
        (
            "[http]\nheaders = ['X-Ok: 1', 'no colon']\n",
            "headers",
            "item 1: 'no ...' is not 'Name: value'",
        ),
        ("[metrics]\nmetrics_port = 65536\n", "metrics_port", "must be a TCP port"),
        ("[metrics]\nmetrics_host = ''\n", "metrics_host", "must be a host name or address"),
        ("[backend]\nlease_timeout = -1\n", "lease_timeout", "must be a finite number >= 0"),
        ("[http]\nauth = 'nocolon'\n", "auth", "must be 'user:password' (no colon found)"),
        ("[http]\nauth_env = 'A B'\n", "auth_env", "must be an environment variable name"),
        ("[http]\nheaders = ['Bad Name: 1']\n", "headers", "item 0: 'Bad Name' is not a valid"),
        ('[http]\nheaders = ["X: a\\nb"]\n', "headers", "the value of X holds a line break"),
        ("[http]\nproxy = 'socks5://127.0.0.1:1080'\n", "proxy", "SOCKS proxies are not supp"),
        ("[http]\nproxy = 'ftp://127.0.0.1:21'\n", "proxy", "is not an http(s)://HOST[:PORT]"),
        ("[http]\nproxy = 'http://:3128'\n", "proxy", "has no host"),
        ("[http]\nproxy = 'http://h:3128/x'\n", "proxy", "has a path or query"),
        ("[http]\nproxy = 'http://h:99999'\n", "proxy", "is not a valid URL"),
        ("[http.origin_auth]\n'a.test' = 'u:p'\n", "origin_auth", "'a.test' is not an origin"),
        ("[http.origin_auth]\n'https://a.test/x' = 'u:p'\n", "origin_auth", "only scheme, h"),
        ("[http.origin_auth]\n'https://a.test' = 'up'\n", "origin_auth", "no colon found"),
        ("[http.origin_auth]\n'https://a.test' = 1\n", "origin_auth", "must be a string"),
        ("[http]\norigin_auth = 'u:p'\n", "origin_auth", "must be a table of strings"),
        ("state = 'redis://127.0.0.1:6379/x'\n", "state", "the database must be a number"),
        ("state = 'redis:///0'\n", "state", "has no host"),
        ("state = 'redis://h:0/0'\n", "state", "the port must be 1-65535"),
        ("state = 'unix://'\n", "state", "has no socket path"),
        ("[backend]\nname = 'n'\n", "name", "needs a redis:// state (--state redis://HOST"),
        ("[http]\nauth = 'a:b'\nauth_env = 'V'\n", "auth_env", "cannot be given with auth"),
        ("frontier = 'memory'\n", "frontier", "removed: the backend is chosen by `state`"),
        ("[backend]\nfrontier = 'memory'\n", "backend.frontier", "removed: the backend"),
    ],
)
def test_bad_file_names_file_key_and_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert err.source == str(path)
    assert err.key == key
    assert reason in err.reason
    assert str(err).startswith(f"{path}: {key}: ")


def test_invalid_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "max_pages = 5\nconcurrency = = 3\n")
    with pytest.raises(ConfigError, match=r"crawl\.toml: invalid TOML: .*line 2"):
        load_toml(path)


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read config file: No such file"):
        load_toml(tmp_path / "nope.toml")


def test_override_errors_name_their_source(tmp_path: Path) -> None:
    path = write(tmp_path, "max_pages = 5\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, {"concurrency": -1})
    assert (info.value.source, info.value.key) == ("command line", "concurrency")
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(None, {"bogus": 1})


def test_state_is_a_directory_or_none(tmp_path: Path) -> None:
    path = write(tmp_path, "[backend]\nstate = 'crawl-state'\n")
    assert load_config(path).state == "crawl-state"
    assert load_config(path, {"state": "other"}).state == "other"
    assert CrawlConfig().state is None
    assert CrawlConfig(state="redis://127.0.0.1:6379/0").validated().state == (
        "redis://127.0.0.1:6379/0"
    )


def test_removed_frontier_key_says_what_to_do_everywhere() -> None:
    with pytest.raises(ConfigError, match=r"^lib: frontier: removed: the backend is chosen"):
        from_mapping({"frontier": "memory"}, source="lib")
    with pytest.raises(ConfigError, match=r"^command line: frontier: removed"):
        load_config(None, {"frontier": "memory"})


def test_validated_normalises_for_library_callers() -> None:
    config = CrawlConfig(
        seeds=["https://example.org/"],  # type: ignore[arg-type]
        include=["a", "b"],  # type: ignore[arg-type]
        delay=1,
    ).validated()
    assert config.seeds == ("https://example.org/",)
    assert config.include == ("a", "b")
    assert isinstance(config.delay, float)
    with pytest.raises(ConfigError, match=r"^max_depth: must be >= 0"):
        CrawlConfig(max_depth=-1).validated()
    with pytest.raises(ConfigError, match=r"^lib: concurrency:"):
        CrawlConfig(concurrency=0).validated(source="lib")


def test_from_mapping_rejects_unknown_keys() -> None:
    with pytest.raises(
        ConfigError, match=r"^x: concurency: unknown key \(did you mean 'concurrency'"
    ):
        from_mapping({"concurency": 3}, source="x")


@pytest.mark.parametrize(
    "url",
    [
        "http://example.org",
        "https://example.org/a?b#c",
        "HTTP://EXAMPLE.ORG/",
        "http://127.0.0.1:8080/",
    ],
)
def test_good_seeds(url: str) -> None:
    assert seed_problem(url) is None


def test_zero_means_no_limit_and_is_accepted() -> None:
    config = CrawlConfig(
        max_pages=0, max_depth=0, max_url_length=0, max_body_bytes=0, timeout=0, retries=0
    ).validated()
    assert config.max_pages == 0 and config.timeout == 0.0
    assert not math.isnan(config.delay)


# -- credentials in messages --

PW = "Zx9-secret"


@pytest.mark.parametrize(
    "text",
    [
        f"[http]\nauth = ['{PW}']\n",  # a list: the wrong type, not quoted either
        f"[http]\nauth = '{PW}'\n",  # no colon: the whole value may be the password
        f"[http]\nheaders = '{PW}'\n",
        f"[http]\nheaders = ['X-Api-Key {PW}']\n",
        f'[http]\nheaders = ["X-Api-Key: {PW}\\r\\n"]\n',
        f"[http]\nproxy = 'socks5://u:{PW}@127.0.0.1:1080'\n",
        f"[http]\nproxy = 'http://u:{PW}@/'\n",
        f"[http.origin_auth]\n'https://a.test' = '{PW}'\n",
        f"[http]\norigin_auth = '{PW}'\n",
        f"state = 'redis://:{PW}@127.0.0.1:6379/x'\n",
    ],
)
def test_an_error_never_shows_a_credential(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert PW not in str(info.value), str(info.value)


def test_redact_url() -> None:
    from crawler.config import redact_url  # noqa: PLC0415

    assert redact_url("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert redact_url("http://u:pw@h:3128") == "http://u:***@h:3128"
    assert redact_url("http://u@h:3128") == "http://u:***@h:3128"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"
    assert redact_url("http://[bad") == "(a URL that cannot be parsed)"


def test_keys_that_go_together_are_checked_on_the_whole(tmp_path: Path) -> None:
    # a file with `name` and the flag with the redis:// state: fine together
    path = write(tmp_path, "[backend]\nname = 'site-1'\n")
    cfg = load_config(path, {"state": "redis://127.0.0.1:6379/2"})
    assert (cfg.name, cfg.state) == ("site-1", "redis://127.0.0.1:6379/2")
    with pytest.raises(ConfigError) as info:
        load_config(path, {"state": "dir"})
    assert (info.value.source, info.value.key) == ("command line", "name")
    with pytest.raises(ConfigError, match="^auth_env: cannot be given with auth"):
        CrawlConfig(auth="a:b", auth_env="V").validated()


def test_a_redis_scheme_is_read_in_any_case() -> None:
    cfg = CrawlConfig(state="REDIS://127.0.0.1:6379/0").validated()
    assert cfg.state == "redis://127.0.0.1:6379/0"
    assert CrawlConfig(state="unix:///run/redis.sock?db=1").validated().state.startswith("unix")


def test_a_seed_with_a_password_is_refused_without_showing_it() -> None:
    reason = seed_problem("http://u:Pw9x@127.0.0.1:8080/")
    assert reason == (
        "'http://u:***@127.0.0.1:8080/' holds a password: give the credentials with --auth or"
        " --auth-env (a URL's are never sent, and a seed is stored and printed)"
    )
    assert "Pw9x" not in (seed_problem("ftp://u:Pw9x@h/") or "x Pw9x")
    assert "Pw9x" not in (seed_problem("http://u:Pw9x@/") or "x Pw9x")
    assert seed_problem("http://u@127.0.0.1/") is None  # a user name alone is no secret


def test_repr_shows_no_credential() -> None:
    config = CrawlConfig(
        seeds=("http://127.0.0.1/",),
        headers=("X-Api-Key: hdr-secret",),
        auth="alice:pw-secret",
        origin_auth={"http://127.0.0.1:80": "bob:origin-secret"},
        proxy="http://u:proxy-secret@127.0.0.1:3128",
    ).validated()
    text = repr(config)
    assert "http://127.0.0.1/" in text  # the rest is still shown
    for secret in ("hdr-secret", "pw-secret", "origin-secret", "proxy-secret"):
        assert secret not in text
