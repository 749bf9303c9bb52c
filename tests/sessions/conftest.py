"""Fixtures for the session-service contract suite.

Every backend is an entry of :data:`SERVICE_FACTORIES`: a zero-argument callable returning an
async context manager that yields a fresh, empty service and releases it afterwards (a file-backed
backend makes and removes its own temporary directory; a server-backed one its own schema). A new
backend joins the whole suite by adding one ``pytest.param`` here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest
import trio

from tests.pg_cluster import ensure_cluster
from trio_agents.sessions import (
    InMemorySessionService,
    PostgresSessionService,
    SessionService,
    SqliteSessionService,
)

ServiceFactory = Callable[[], AbstractAsyncContextManager[SessionService]]


@contextlib.asynccontextmanager
async def open_memory_service() -> AsyncIterator[SessionService]:
    yield InMemorySessionService()


@contextlib.asynccontextmanager
async def open_sqlite_service() -> AsyncIterator[SessionService]:
    with tempfile.TemporaryDirectory(prefix="trio-agents-") as directory:
        async with SqliteSessionService(os.path.join(directory, "sessions.db")) as service:
            yield service


@contextlib.asynccontextmanager
async def open_postgres_service() -> AsyncIterator[SessionService]:
    dsn = await trio.to_thread.run_sync(ensure_cluster)
    async with PostgresSessionService(dsn) as service:
        yield service


SERVICE_FACTORIES = [
    pytest.param(open_memory_service, id="memory"),
    pytest.param(open_sqlite_service, id="sqlite"),
    pytest.param(open_postgres_service, id="postgres"),
]


@pytest.fixture(scope="session", params=SERVICE_FACTORIES)
def service_factory(request: pytest.FixtureRequest) -> ServiceFactory:
    """How to open a fresh service of one backend (session-scoped: usable under Hypothesis)."""
    factory: ServiceFactory = request.param
    return factory


@pytest.fixture
async def session_service(service_factory: ServiceFactory) -> AsyncIterator[SessionService]:
    """A fresh, empty service of each backend."""
    async with service_factory() as service:
        yield service
