"""Fixtures for model-client tests: fake providers served over real loopback sockets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

Serve = Callable[[Any], Awaitable[str]]


@pytest.fixture
async def serve_app(nursery: trio.Nursery) -> Serve:
    """``await serve_app(asgi_app)`` serves it on 127.0.0.1 and returns its base URL.

    The servers stop when the test ends (the test's nursery is cancelled).
    """

    async def start(app: Any) -> str:
        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.accesslog = None
        config.errorlog = None
        config.graceful_timeout = 0.1
        binds = await nursery.start(serve, app, config)
        return str(binds[0]).replace("0.0.0.0", "127.0.0.1")

    return start
