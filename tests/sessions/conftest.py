"""Fixtures for the session-service contract suite.

Every backend is an entry of :data:`SERVICE_FACTORIES`: a zero-argument callable returning an
async context manager that yields a fresh, empty service and releases it afterwards (a file-backed
backend makes and removes its own temporary directory; a server-backed one its own schema). A new
backend joins the whole suite by adding one ``pytest.param`` here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from trio_agents.sessions import InMemorySessionService, SessionService

ServiceFactory = Callable[[], AbstractAsyncContextManager[SessionService]]


@contextlib.asynccontextmanager
async def open_memory_service() -> AsyncIterator[SessionService]:
    yield InMemorySessionService()


SERVICE_FACTORIES = [
    pytest.param(open_memory_service, id="memory"),
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
