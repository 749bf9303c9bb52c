"""Service URIs: ``memory://``, ``sqlite:///path`` and ``postgresql://…``."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio

from .._app import App
from .._errors import ConfigurationError, TrioAgentsError
from .._runner import Runner
from ..agents import BaseAgent
from ..artifacts import ArtifactService, InMemoryArtifactService
from ..sessions import InMemorySessionService, SessionService

__all__ = ["Services", "open_services", "runner_for"]


@attrs.frozen
class Services:
    """The services a command runs its apps with."""

    sessions: SessionService
    artifacts: ArtifactService
    memory: Any = None


def _sqlite_path(uri: str) -> str:
    if "?" in uri or "#" in uri:
        raise ConfigurationError(f"a SQLite URI takes no query or fragment, got {uri!r}")
    path = uri[len("sqlite://") :]
    if not path.startswith("/"):
        raise ConfigurationError(
            f"a SQLite URI is sqlite:///relative or sqlite:////absolute, got {uri!r}"
        )
    return path[1:] or ":memory:"


def _backend(module: str, name: str, uri: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"{uri!r} needs {name}, which is not available: {exc}") from exc


def _session_service(uri: str) -> SessionService:
    scheme = urlsplit(uri).scheme
    if scheme == "memory":
        return InMemorySessionService()
    if scheme == "sqlite":
        cls = _backend("trio_agents.sessions", "SqliteSessionService", uri)
        service: SessionService = cls(_sqlite_path(uri))
        return service
    if scheme in ("postgresql", "postgres"):
        cls = _backend("trio_agents.sessions", "PostgresSessionService", uri)
        service = cls(uri)
        return service
    raise ConfigurationError(
        f"unknown session service URI {uri!r} (memory://, sqlite:///, postgresql://)"
    )


def _artifact_service(uri: str) -> ArtifactService:
    parts = urlsplit(uri)
    if parts.scheme == "memory":
        return InMemoryArtifactService()
    if parts.scheme == "file":
        cls = _backend("trio_agents.artifacts", "FileArtifactService", uri)
        service: ArtifactService = cls(parts.path)
        return service
    raise ConfigurationError(f"unknown artifact service URI {uri!r} (memory://, file:///dir)")


def _memory_service(uri: str | None) -> Any:
    if uri is None:
        return None
    scheme = urlsplit(uri).scheme
    if scheme == "memory":
        return _backend("trio_agents.memory", "InMemoryMemoryService", uri)()
    if scheme == "sqlite":
        return _backend("trio_agents.memory", "SqliteMemoryService", uri)(_sqlite_path(uri))
    raise ConfigurationError(f"unknown memory service URI {uri!r} (memory://, sqlite:///)")


STARTUP_CHECK_APP = "trio_agents_startup_check"
"""The app name of the read that checks a session store opens (no such app is ever written)."""


@contextlib.asynccontextmanager
async def open_services(
    *,
    sessions: str = "memory://",
    artifacts: str = "memory://",
    memory: str | None = None,
) -> AsyncIterator[Services]:
    """Open the services the URIs name; close those that need closing on exit.

    The session store is read once before anything runs, so an unreadable database or an
    unreachable server fails here, naming its URI.
    """
    services = Services(
        _session_service(sessions),
        _artifact_service(artifacts),
        _memory_service(memory),
    )
    try:
        await _check_sessions(services.sessions, sessions)
        yield services
    finally:
        with trio.CancelScope(shield=True):
            for service in (services.sessions, services.artifacts, services.memory):
                close = getattr(service, "aclose", None)
                if close is not None:
                    await close()


async def _check_sessions(service: SessionService, uri: str) -> None:
    try:
        await service.list_sessions(app_name=STARTUP_CHECK_APP, user_id="user")
    except TrioAgentsError as exc:
        raise ConfigurationError(f"session service {_redacted(uri)!r}: {exc}") from exc
    except Exception as exc:  # a driver's own error (sqlite3, psycopg, OSError): name the URI
        detail = " ".join(str(exc).split())
        raise ConfigurationError(
            f"session service {_redacted(uri)!r} cannot be opened: {type(exc).__name__}: {detail}"
        ) from exc


def _redacted(uri: str) -> str:
    """``uri`` without a password."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()


def runner_for(app_name: str, agent: BaseAgent | App, services: Services) -> Runner:
    """A Runner of the agent, or of the app (its plugins and resumability) under ``app_name``."""
    stores = {
        "session_service": services.sessions,
        "artifact_service": services.artifacts,
        "memory_service": services.memory,
    }
    if isinstance(agent, App):
        return Runner(app=attrs.evolve(agent, name=app_name), **stores)
    return Runner(agent=agent, app_name=app_name, **stores)
