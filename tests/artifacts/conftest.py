"""Fixtures for the artifact-service contract suite.

Every backend is an entry of :data:`ARTIFACT_SERVICE_FACTORIES`: a zero-argument callable returning
an async context manager that yields a fresh, empty service and releases it afterwards (a
file-backed backend makes and removes its own temporary directory, a GCS one its own bucket
prefix). A new backend joins the whole suite by adding one ``pytest.param`` here.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from trio_agents.artifacts import ArtifactService, FileArtifactService, InMemoryArtifactService

ArtifactServiceFactory = Callable[[], AbstractAsyncContextManager[ArtifactService]]


@contextlib.asynccontextmanager
async def open_memory_service() -> AsyncIterator[ArtifactService]:
    yield InMemoryArtifactService()


@contextlib.asynccontextmanager
async def open_file_service() -> AsyncIterator[ArtifactService]:
    with tempfile.TemporaryDirectory(prefix="trio-agents-artifacts-") as root:
        yield FileArtifactService(root)


ARTIFACT_SERVICE_FACTORIES = [
    pytest.param(open_memory_service, id="memory"),
    pytest.param(open_file_service, id="file"),
]


@pytest.fixture(scope="session", params=ARTIFACT_SERVICE_FACTORIES)
def artifact_service_factory(request: pytest.FixtureRequest) -> ArtifactServiceFactory:
    """How to open a fresh service of one backend (session-scoped: usable under Hypothesis)."""
    factory: ArtifactServiceFactory = request.param
    return factory


@pytest.fixture
async def artifact_service(
    artifact_service_factory: ArtifactServiceFactory,
) -> AsyncIterator[ArtifactService]:
    """A fresh, empty service of each backend."""
    async with artifact_service_factory() as service:
        yield service
