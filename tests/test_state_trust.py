"""A ``--state DIR`` someone else could have written is refused before anything in it is used.

The attack (issue 27, item 3): a state directory holds the settings a resumed run is told to
use: a proxy, the name of the environment variable to read credentials from, output, WARC and
cookie paths, headers. A directory that another user owns, or that group or others may write,
could have been planted: it is refused (exit 2, the reason and the fix named), as git refuses a
repository another user owns (CVE-2022-24765), and nothing is sent anywhere. A new state
directory is created 0700, its lock file 0600.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from crawler.state import StateError
from crawler.state.sqlite import SQLiteState
from tests.conftest import ServeApp
from tests.proxyserver import ForwardProxy
from tests.test_cli import CRAWLER, SITE, Done, no_traceback, site_app

ENV = "CRAWLER_TEST_PROXY_SECRET"


async def run_env(*args: str, env: dict[str, str]) -> Done:
    proc = await asyncio.create_subprocess_exec(
        *CRAWLER,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


@pytest.fixture
async def planted(serve: ServeApp, tmp_path: Path) -> tuple[Path, ForwardProxy, str]:
    """A real crawl kept in a state whose stored settings name a proxy and --auth-env."""
    site = await serve(site_app(SITE))
    proxy = ForwardProxy()
    proxy_server = await serve(proxy.app())
    state = tmp_path / "state"
    url = f"http://127.0.0.1:{site.port}/"
    done = await run_env(
        "crawl", url, "--state", str(state), "--max-pages", "1",
        "--proxy", f"http://127.0.0.1:{proxy_server.port}", "--auth-env", ENV,
        env={ENV: "user:first-secret"},
    )  # fmt: skip
    no_traceback(done)
    assert done.rc == 0, done.err
    assert proxy.log, "the first run went through the proxy"
    return state, proxy, url


def test_a_new_state_directory_is_private(tmp_path: Path) -> None:
    async def go() -> None:
        state = SQLiteState(tmp_path / "new" / "state")
        await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
        await state.close()

    asyncio.run(go())
    where = tmp_path / "new" / "state"
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert stat.S_IMODE((where / "lock").stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
async def test_a_state_others_can_write_is_refused_and_nothing_is_sent(
    planted: tuple[Path, ForwardProxy, str], mode: int
) -> None:
    state, proxy, _ = planted
    seen = len(proxy.log), len(proxy.auth_seen)
    state.chmod(mode)
    done = await run_env("crawl", "--state", str(state), env={ENV: "user:second-secret"})
    no_traceback(done)
    assert done.rc == 2, done.err
    assert "writable by" in done.err and f"{mode:04o}" in done.err and "chmod go-w" in done.err
    assert (len(proxy.log), len(proxy.auth_seen)) == seen, "a refused state sent a request"
    assert "second-secret" not in done.err
    status = await run_env("status", "--state", str(state), env={})
    assert status.rc == 2 and "writable by" in status.err, status.err
    state.chmod(0o700)  # the owner's fix: then the same command runs
    done = await run_env("crawl", "--state", str(state), env={ENV: "user:second-secret"})
    assert done.rc == 0, done.err


async def test_a_database_others_can_write_is_refused(
    planted: tuple[Path, ForwardProxy, str],
) -> None:
    state, _, _ = planted
    (state / "state.db").chmod(0o666)
    done = await run_env("crawl", "--state", str(state), env={})
    assert done.rc == 2 and "state.db: writable by group and others" in done.err, done.err


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
async def test_a_state_another_user_owns_is_refused(
    planted: tuple[Path, ForwardProxy, str],
) -> None:
    state, proxy, url = planted
    seen = len(proxy.log)
    for path in (state, *state.iterdir()):
        os.chown(path, 65534, 65534)  # nobody
    done = await run_env("crawl", "--state", str(state), env={ENV: "user:x"})
    assert done.rc == 2, done.err
    assert "owned by uid 65534" in done.err and "not trusted" in done.err
    done = await run_env("crawl", url, "--state", str(state), env={ENV: "user:x"})
    assert done.rc == 2 and "owned by uid 65534" in done.err, done.err
    assert len(proxy.log) == seen
    with pytest.raises(StateError, match="owned by uid 65534"):
        SQLiteState.read_settings(state)
