"""Fixtures for the memory-service contract suite.

Every backend is an entry of :data:`MEMORY_FACTORIES`: a zero-argument callable returning an
async context manager that yields a fresh, empty service and closes it afterwards (a file-backed
one makes and removes its own temporary directory). A new backend joins the whole suite by adding
one ``pytest.param`` here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from trio_agents.memory import InMemoryMemoryService, MemoryService, SqliteMemoryService

MemoryFactory = Callable[[], AbstractAsyncContextManager[MemoryService]]


@contextlib.asynccontextmanager
async def open_memory() -> AsyncIterator[MemoryService]:
    service = InMemoryMemoryService()
    try:
        yield service
    finally:
        await service.aclose()


@contextlib.asynccontextmanager
async def open_sqlite() -> AsyncIterator[MemoryService]:
    with tempfile.TemporaryDirectory(prefix="trio-agents-memory-") as directory:
        async with SqliteMemoryService(os.path.join(directory, "memory.db")) as service:
            yield service


MEMORY_FACTORIES = [
    pytest.param(open_memory, id="memory"),
    pytest.param(open_sqlite, id="sqlite"),
]


@pytest.fixture(scope="session", params=MEMORY_FACTORIES)
def memory_factory(request: pytest.FixtureRequest) -> MemoryFactory:
    """How to open a fresh service of one backend (session-scoped: usable under Hypothesis)."""
    factory: MemoryFactory = request.param
    return factory


@pytest.fixture
async def memory_service(memory_factory: MemoryFactory) -> AsyncIterator[MemoryService]:
    """A fresh, empty service of each backend."""
    async with memory_factory() as service:
        yield service
