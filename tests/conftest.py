"""Shared fixtures: a real aiohttp server on 127.0.0.1 (port 0) for any web.Application."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

# `from tests.sitegen import Site` works under plain `pytest` too, not only `python -m pytest`.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

ServeApp = Callable[[web.Application], Awaitable[TestServer]]


@pytest.fixture
async def serve() -> AsyncIterator[ServeApp]:
    """``server = await serve(app)``: start ``app`` on 127.0.0.1, stopped after the test."""
    servers: list[TestServer] = []

    async def start(app: web.Application) -> TestServer:
        server = TestServer(app, host="127.0.0.1", port=0)
        await server.start_server()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()
