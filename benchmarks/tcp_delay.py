#!/usr/bin/env python3
"""A TCP proxy that adds a fixed one-way delay in each direction: a network round trip of
``--rtt-ms`` between a client and a server on the same machine (benchmarks/cluster_scaling.py
puts it in front of Redis: this kernel has no ``netem``).

    python benchmarks/tcp_delay.py --listen 127.0.0.1:7001 --to 127.0.0.1:6379 --rtt-ms 1
    redis-cli -p 7001 --latency          # min/avg about 1 ms more than without the proxy

Every chunk read from one side is written to the other ``rtt/2`` after it was read, in the
order it was read (a per-direction FIFO: a later chunk never overtakes an earlier one), so a
request/reply exchange costs one added round trip, and pipelined traffic is delayed, not
throttled: there is no bandwidth limit, any number of chunks are in flight.

Why asyncio on ``selectors.SelectSelector``: the default epoll selector rounds its timeout
UP to whole milliseconds (epoll_wait takes ms), which would turn a 0.125 ms delay into 1 ms;
select(2) takes microseconds. select's 1,024-descriptor limit is far above the few dozen
connections a cluster of crawler workers opens. Flow control: when the other side's write
buffer holds more than 4 MiB, reading from this side pauses until it drains (the FIFO never
grows without bound).

The proxy prints ``listening HOST:PORT`` on stdout once it accepts connections (so a parent
can wait for it) and runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import selectors
import signal
import sys
import time

HIGH_WATER = 4 * 1024 * 1024


class _Direction:
    """One direction of one connection: chunks read from ``source`` reach ``sink`` after
    ``delay`` seconds, in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop = loop
        self.delay = delay
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.sink: asyncio.Transport | None = None
        self.eof_at: float | None = None  # when the source's EOF is due at the sink
        self.eof_done = False
        self.other: _Direction | None = None  # the reverse direction of the same connection

    def push(self, data: bytes) -> None:
        due = time.monotonic() + self.delay
        if self.delay <= 0 and not self.queue and self.sink is not None:
            self.sink.write(data)
            return
        self.queue.append((due, data))
        self._arm()

    def push_eof(self) -> None:
        self.eof_at = time.monotonic() + self.delay
        self._arm()

    def _arm(self) -> None:
        if self.timer is not None or self.sink is None:
            return
        due = self.queue[0][0] if self.queue else self.eof_at
        if due is None:
            return
        # loop.time() is time.monotonic() on CPython's event loop.
        self.timer = self.loop.call_at(due, self._flush)

    def _flush(self) -> None:
        self.timer = None
        sink = self.sink
        if sink is None or sink.is_closing():
            self.queue.clear()
            return
        now = time.monotonic()
        while self.queue and self.queue[0][0] <= now:
            sink.write(self.queue.popleft()[1])
        if not self.queue and self.eof_at is not None and self.eof_at <= now:
            self.eof_at = None
            self.eof_done = True
            half_closed = False
            if sink.can_write_eof():
                try:
                    sink.write_eof()
                    half_closed = True
                except OSError:  # the other end is gone already (ENOTCONN): just close
                    pass
            if self.other is None or self.other.eof_done or not half_closed:
                sink.close()  # both ways finished: the connection is over
                if self.other is not None and self.other.sink is not None:
                    self.other.sink.close()
            return
        self._arm()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queue.clear()


class _Side(asyncio.Protocol):
    """One socket of a proxied connection (the client's or the server's)."""

    def __init__(self, outgoing: _Direction, peer: _Side | None = None) -> None:
        self.outgoing = outgoing  # what this side reads goes here
        self.peer = peer
        self.transport: asyncio.Transport | None = None
        self.pending: list[bytes] = []  # read before the peer is connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        self.outgoing.push(data)

    def eof_received(self) -> bool:
        self.outgoing.push_eof()
        return True  # keep our write side open until the peer's EOF is delivered

    def connection_lost(self, exc: Exception | None) -> None:
        self.outgoing.close()
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    # the peer's transport calls these on OUR protocol through its sink's buffer limits
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


async def _serve(listen: tuple[str, int], target: tuple[str, int], delay: float) -> None:
    loop = asyncio.get_running_loop()

    def client_factory() -> _Side:
        up = _Direction(loop, delay)  # client -> server
        down = _Direction(loop, delay)  # server -> client
        up.other, down.other = down, up
        client = _Side(up)

        async def connect() -> None:
            try:
                _t, server = await loop.create_connection(lambda: _Side(down, client), *target)
            except OSError as e:
                print(f"tcp_delay: connect {target}: {e}", file=sys.stderr, flush=True)
                if client.transport is not None:
                    client.transport.close()
                return
            client.peer = server
            assert server.transport is not None and client.transport is not None
            up.sink = server.transport
            down.sink = client.transport
            up._arm()

        loop.create_task(connect())
        return client

    server = await loop.create_server(client_factory, *listen, reuse_address=True)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening {host}:{port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def _tight_timers() -> None:
    """Timer slack 1 ns (Linux prctl PR_SET_TIMERSLACK; the default 50 us is added to every
    sleep of this process, a large share of a 0.125 ms delay). Best effort elsewhere."""
    try:
        import ctypes  # noqa: PLC0415

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK = 29
    except (OSError, AttributeError):
        pass


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--listen", type=_addr, required=True, help="HOST:PORT (port 0: any free)")
    ap.add_argument("--to", type=_addr, required=True, help="the server's HOST:PORT")
    ap.add_argument("--rtt-ms", type=float, required=True, help="added round trip, ms")
    args = ap.parse_args(argv)
    if args.rtt_ms < 0:
        ap.error("--rtt-ms: must be >= 0")
    _tight_timers()
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    try:
        loop.run_until_complete(_serve(args.listen, args.to, args.rtt_ms / 2000.0))
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
