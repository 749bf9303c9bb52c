"""A real server on 127.0.0.1 (`trio_agents.server.serve`) and an httpx client for it."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio

from trio_agents.server import serve

Start = Callable[[Any], Awaitable[str]]


@pytest.fixture
async def start_server(nursery: trio.Nursery) -> Start:
    """``url = await start_server(app)`` serves ``app`` until the test ends."""

    async def start(app: Any) -> str:
        server = functools.partial(serve, app, port=0, graceful_timeout=0.1)
        urls: list[str] = await nursery.start(server)
        return urls[0]

    return start


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as http:
        yield http
