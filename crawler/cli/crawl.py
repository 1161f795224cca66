"""``crawler crawl URL ...``: the crawl's command: its parser, the config and stored settings
read before anything starts, then the engine run on an event loop with what only a command
line has: exit codes, signals, a closed stdout pipe, progress on stderr.

With ``--state DIR`` the stored settings are read (read-only, before the engine takes the
state's lock) and merged with this run's (``crawler.core.settings.resume``) first, so that a
conflicting flag is refused, and the output of the stored crawl is known, before anything is
written; the output file is then appended to, not truncated (``crawler.output.sinks``). With
``--state redis://...`` the same, through ``RedisState.read_settings``; a worker given no URL
before the crawl exists waits for it (``_wait_for_crawl``). Bad fetch options (a cookies file,
``--auth-env``, a proxy ...) and an unwritable ``--warc`` are refused before anything starts.
Credentials never reach a message: options that hold them are named, never quoted.

Exit codes: 0 done; 1 the crawl finished with errors only (no page fetched successfully) or
the output could not be written; 2 usage or config error; 130 SIGINT; 143 SIGTERM.

Start-up time: importing this module imports none of the crawl's modules (config, output,
asyncio, aiohttp ...); ``cmd_crawl`` imports what it uses when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from typing import IO, TYPE_CHECKING, Any, TypeVar

from crawler.cli.options import (
    COMMAND_HELP,
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_USAGE,
    PROG,
    Formatter,
    add_crawl_options,
    check_fetch_options,
    config_from_args,
    err,
    explain,
    extractor_hint,
    given_keys,
)

if TYPE_CHECKING:
    import signal
    from collections.abc import Coroutine
    from types import ModuleType

    from crawler.config import CrawlConfig
    from crawler.core.engine import Crawler
    from crawler.core.results import CrawlStats
    from crawler.output.progress import Progress, Snapshot
    from crawler.output.sinks import OutputSink

_T = TypeVar("_T")


def add_parser(sub: Any) -> None:
    """Add the ``crawl`` command to the ``crawler`` parser's subparsers."""
    crawl = sub.add_parser(
        "crawl",
        help=COMMAND_HELP["crawl"],
        description="Crawl from the seed URLs; results on stdout (or --output), progress and "
        "the summary on stderr. Every option has a key of the same name (with _) in the "
        "--config file; flags override the file.",
        formatter_class=Formatter,
        epilog="exit codes: 0 done, 1 finished with errors only (e.g. the seed failed),"
        " 2 usage or config error, 130 SIGINT, 143 SIGTERM",
    )
    crawl.add_argument(
        "seeds", nargs="*", metavar="URL", help="seed URLs (http or https); or `seeds` in --config"
    )
    crawl.add_argument(
        "--config",
        metavar="FILE",
        help="TOML config file (`crawler config` prints an example: config.example.toml)",
    )
    # `docker run IMAGE --version` reaches here through the `crawler crawl` entry point
    crawl.add_argument(
        "--version", action="store_true", default=argparse.SUPPRESS, help="print the version"
    )
    add_crawl_options(crawl)


def _redis_backend() -> Any:
    """crawler.state.redis's RedisState (imports redis-py: only for a redis:// state).

    Raises:
        StateError: the Redis backend cannot be imported (redis-py missing).
    """
    from crawler.state.base import StateError  # noqa: PLC0415

    try:
        return importlib.import_module("crawler.state.redis").RedisState
    except ImportError as exc:
        raise StateError(f"the Redis state is not available: {exc}") from None


def _read_stored(state: str, name: str | None = None) -> dict[str, Any] | None:
    """The stored settings of the crawl at ``state`` (None: no crawl there yet), read without
    the lock and without changing anything: a directory (SQLite), or a redis:// URL and the
    crawl's ``name`` in that database.

    Raises:
        StateError: not a crawl state, another format version, corrupt; Redis unreachable.
    """
    from crawler.config import is_redis_url  # noqa: PLC0415  (start-up time)

    if is_redis_url(state):
        found: dict[str, Any] | None = _redis_backend().read_settings(state, name)
        return found
    sqlite = importlib.import_module("crawler.state.sqlite")
    stored: dict[str, Any] | None = sqlite.SQLiteState.read_settings(state)
    return stored


#: Seconds between two looks for a crawl a worker with no URL waits for (a redis:// state).
JOIN_POLL = 0.5


def _crawl_label(config: CrawlConfig) -> str:
    """'crawl NAME at URL' with the URL's password hidden (for messages)."""
    from crawler.config import redact_url  # noqa: PLC0415  (start-up time)

    name = config.name or "default"
    return f"crawl {name} at {redact_url(config.state or '')}"


def _wait_for_crawl(config: CrawlConfig) -> dict[str, Any]:
    """A worker given no URL on a redis:// state with no crawl yet: wait for another worker
    to start it (docker compose starts the workers in any order), then return its settings.

    Says so once on stderr; looks every JOIN_POLL seconds (one cheap read, no busy loop).
    Ctrl-C ends the wait (KeyboardInterrupt: exit 130 in ``main``).

    Raises:
        StateError: Redis unreachable, or settings this version cannot read.
    """
    assert config.state is not None
    if not config.quiet:
        _note(f"no {_crawl_label(config)} yet; waiting for one to start (Ctrl-C to stop)")
    while True:
        time.sleep(JOIN_POLL)
        stored = _read_stored(config.state, config.name)
        if stored is not None:
            return stored


def _note(message: str) -> None:
    try:
        sys.stderr.write(f"{PROG}: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _warc_problem(path: str | None) -> str | None:
    """Why the WARC file ``path`` cannot be written (its directory missing or read-only, the
    file read-only), or None. The writer opens it once the state is open: say so first."""
    if not path:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"--warc: cannot write {path}: no directory {directory}"
    if os.path.isdir(path):
        return f"--warc: {path} is a directory; give a file name (.warc.gz)"
    target = path if os.path.exists(path) else directory
    if not os.access(target, os.W_OK):
        return f"--warc: cannot write {path}: permission denied"
    return None


def _uvloop() -> ModuleType | None:
    try:
        return importlib.import_module("uvloop")
    except ImportError:
        return None


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run on uvloop when it is installed, else the default asyncio loop."""
    import asyncio  # noqa: PLC0415  (start-up time: not for --version, --help)

    uv = _uvloop()
    factory: Any = uv.new_event_loop if uv else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


class _RunState:
    __slots__ = ("crawler", "ran", "signal")

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self.crawler: Crawler | None = None
        self.ran = False  # crawler.run() returned: what is left is closing (and a linger)


def _tune_gc() -> None:
    """Spare the collector the start-up objects and most young-generation passes.

    A crawl makes many short-lived objects and few cycles; the command line owns its process
    (a library must not change these globals). Measured on the 20,000-page benchmark: about
    10% less CPU, the same peak memory (benchmarks/CRAWL.md).
    """
    import gc  # noqa: PLC0415

    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


#: The collector's thresholds for a crawl (``main`` sets them first thing for ``crawl``).
GC_THRESHOLDS = (50_000, 20, 20)


async def _crawl(
    config: CrawlConfig,
    sink: OutputSink,
    progress: Progress,
    given: set[str] | None = None,
    args: argparse.Namespace | None = None,
    resumed: bool = False,
) -> int:
    """Run the crawl with signal handling and live progress; return the exit code."""
    import asyncio  # noqa: PLC0415  (start-up time)
    import signal  # noqa: PLC0415

    from crawler.config import ConfigError, is_redis_url  # noqa: PLC0415
    from crawler.output.progress import Snapshot  # noqa: PLC0415
    from crawler.state.base import StateError  # noqa: PLC0415

    engine = importlib.import_module("crawler.core.engine")
    _tune_gc()
    loop = asyncio.get_running_loop()
    state = _RunState()
    main_task = asyncio.current_task()

    def on_signal(sig: signal.Signals) -> None:
        if state.ran and state.signal is None and state.crawler is not None:
            state.ran = False  # once: another signal is a signal as before
            state.crawler.stop()  # the crawl is over: cut the metrics' linger, keep the exit code
            return
        if state.signal is None:
            state.signal = sig
            if state.crawler is not None:
                state.crawler.stop()
            elif main_task is not None:
                main_task.cancel()
        elif main_task is not None:
            main_task.cancel()  # a second Ctrl-C: stop waiting for a clean stop

    def on_output_failure() -> None:
        if state.crawler is not None:
            state.crawler.stop()

    sink.on_failure = on_output_failure
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            handled.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # Windows, or not the main thread: Ctrl-C still ends the run, less gracefully
    stats: CrawlStats | None = None
    try:
        # The urls format never reads PageResult.links: do not hold every link of a page.
        # jsonl and csv read them from the compiled extractor's compact record.
        page_links = config.format != "urls"
        options: dict[str, Any] = {"page_links": page_links, "link_record": page_links}
        if given is not None:
            options["given"] = given
        async with engine.Crawler(config, sink=sink, **options) as crawler:
            state.crawler = crawler

            def snapshot() -> Snapshot:
                s = crawler.stats
                return Snapshot(s.pages, crawler.in_flight, crawler.queued, s.error_count)

            ticker = asyncio.ensure_future(progress.run(snapshot))
            try:
                if not sink.failed and state.signal is None:
                    await crawler.run()
                    state.ran = True
            finally:
                ticker.cancel()
                await asyncio.gather(ticker, return_exceptions=True)
                stats = crawler.stats
        stats = crawler.stats  # complete once the context has exited
    except asyncio.CancelledError:
        if state.signal is None:
            raise
        if state.crawler is not None:
            stats = state.crawler.stats
    except StateError as exc:  # the state is locked, corrupt ...: nothing was written
        err(str(exc))
        return EXIT_USAGE
    except ConfigError as exc:  # the stored settings changed since we read them
        err(explain(exc, args) if args is not None else str(exc))
        return EXIT_USAGE
    except OSError as exc:
        if not config.warc or exc.filename not in (config.warc, os.path.abspath(config.warc)):
            raise
        err(f"--warc: cannot open {config.warc}: {exc.strerror or exc}")  # opened at start
        return EXIT_USAGE
    except Exception as exc:
        if type(exc).__name__ != "WarcError":  # crawler.output.warc's (imported only with --warc)
            raise
        err(f"--warc: {exc}")
        return EXIT_USAGE
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        sink.close()
    shared = is_redis_url(config.state)
    code = _exit_code(state, sink, stats, progress, resumed, shared)
    if code == EXIT_OK and shared and stats is not None and stats.pages_ok == 0:
        code = _shared_crawl_code(config)
    archive_error = getattr(state.crawler, "archive_error", None)
    if archive_error is not None and not sink.broken_pipe:
        err(f"cannot write the WARC file {config.warc}: {archive_error.strerror or archive_error}")
        return EXIT_ERRORS if code in (EXIT_OK, EXIT_ERRORS) else code
    return code


def _exit_code(
    state: _RunState,
    sink: OutputSink,
    stats: CrawlStats | None,
    progress: Progress,
    resumed: bool = False,
    shared: bool = False,
) -> int:
    import signal  # noqa: PLC0415

    if sink.broken_pipe:
        return EXIT_OK  # the reader took what it wanted (`| head`): quiet, like `rg | head`
    if stats is not None:
        why = state.signal.name if state.signal else ("output error" if sink.error else None)
        if why is None and stats.time_limit:
            why = "time limit"  # --max-time: a limit like --max-pages, exit code as finished
        progress.summary(
            stats,
            stopped_by=why,
            resumed=resumed,
            repaired=sink.repaired,
            shared=shared,
        )
    if sink.error is not None:
        err(f"cannot write output: {sink.error.strerror or sink.error}")
        return EXIT_ERRORS
    if state.signal is not None:
        return EXIT_SIGINT if state.signal == signal.SIGINT else EXIT_SIGTERM
    if stats is None:
        return EXIT_ERRORS
    if stats.pages_ok == 0 and not (shared and stats.pages == stats.resumed_pages):
        return EXIT_ERRORS
    return EXIT_OK


def _shared_crawl_code(config: CrawlConfig) -> int:
    """The exit code of a worker of a shared (redis://) crawl that fetched nothing itself: the
    other workers took every page (a small site, a per-host cap the others held). It succeeded
    if the crawl as a whole has pages done without error; EXIT_ERRORS if not, or if Redis
    cannot say."""
    from crawler.state.base import StateError  # noqa: PLC0415
    from crawler.state.redis import RedisState  # noqa: PLC0415  (redis:// only)

    assert config.state is not None
    try:
        counts = RedisState.read_status(config.state, config.name).counts
    except StateError as exc:
        err(str(exc))
        return EXIT_ERRORS
    return EXIT_OK if counts.done > sum(counts.failed.values()) else EXIT_ERRORS


def cmd_crawl(args: argparse.Namespace) -> int:
    """Run ``crawler crawl``; the exit code."""
    from crawler.config import ConfigError, is_redis_url  # noqa: PLC0415  (start-up time)
    from crawler.output.progress import Progress  # noqa: PLC0415
    from crawler.output.sinks import open_sink  # noqa: PLC0415

    try:
        config = config_from_args(args)
        given = given_keys(args)
    except ConfigError as exc:
        err(str(exc))
        return EXIT_USAGE
    stored: dict[str, Any] | None = None
    if config.state:
        from crawler.core import settings  # noqa: PLC0415  (start-up time: only with a state)
        from crawler.state.base import StateError  # noqa: PLC0415

        try:
            stored = _read_stored(config.state, config.name)
            if stored is None and not config.seeds and is_redis_url(config.state):
                stored = _wait_for_crawl(config)
            if stored is not None:
                config = settings.resume(stored, config, given)
        except StateError as exc:
            err(str(exc))
            return EXIT_USAGE
        except ConfigError as exc:
            err(explain(exc, args))
            return EXIT_USAGE
    if not config.seeds:
        where = f"{config.state} holds no crawl yet, " if config.state else ""
        err(f"no seed URL: {where}give one or more URLs, or `seeds` in the --config file")
        return EXIT_USAGE
    problem = check_fetch_options(config) or _warc_problem(config.warc)
    if problem:
        err(problem)
        return EXIT_USAGE
    from crawler.config.credentials import sends_credentials  # noqa: PLC0415

    try:
        resume = None if not config.state else stored is not None
        # 0600 when the crawl sends credentials: it lists what only a logged-in user finds
        private = sends_credentials(config)
        sink = open_sink(config.format, config.output, resume=resume, private=private)
    except OSError as exc:
        err(f"cannot open output file {config.output!r}: {exc.strerror or exc}")
        return EXIT_USAGE
    extractor_hint(config.quiet)
    progress = Progress(sys.stderr, quiet=config.quiet)
    if progress.live and config.output in (None, "-") and _isatty(sys.stdout):
        sink.before_write = progress.clear
    state_given = given if config.state else None
    return _run(_crawl(config, sink, progress, state_given, args, resumed=stored is not None))


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
