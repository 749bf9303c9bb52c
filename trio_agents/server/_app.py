"""``create_app``: the Starlette application of the HTTP API."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .._app import App
from .._errors import ConfigurationError, SerializationError, StoreUnavailableError
from ..agents import BaseAgent
from ..artifacts import ArtifactService, InMemoryArtifactService
from ..memory import MemoryService
from ..plugins import BasePlugin
from ..sessions import SessionService
from ._cluster import cluster_of
from ._core import ServerCore
from ._dev import DevRoutes
from ._direct import ApiApp
from ._http import (
    BearerAuth,
    BodyLimits,
    HTTPError,
    JsonCors,
    RefuseNul,
    error_response,
    unavailable,
)
from ._runs import OUTCOME_HEADER, RunRoutes
from ._sessions import SessionRoutes
from ._traces import SpanRecorder

__all__ = [
    "DEFAULT_BODY_READ_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DETACHED_RUNS",
    "create_app",
]

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest request body accepted by default (16 MiB); larger ones get 413."""

DEFAULT_BODY_READ_TIMEOUT = 30.0
"""Seconds a request body may take to arrive by default; a slower one gets 408."""

DEFAULT_MAX_DETACHED_RUNS = 64
"""Detached runs in flight at once by default; more get 503 with ``Retry-After``."""

SESSION = "/apps/{app_name}/users/{user_id}/sessions/{session_id}"
ARTIFACT = SESSION + "/artifacts/{artifact_name}"


def create_app(
    agents: Mapping[str, BaseAgent | App] | Callable[[], Mapping[str, BaseAgent | App]],
    *,
    session_service: SessionService,
    artifact_service: ArtifactService | None = None,
    memory_service: MemoryService | None = None,
    plugins: Sequence[BasePlugin] = (),
    auth_token: str | None = None,
    cors_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_detached_runs: int = DEFAULT_MAX_DETACHED_RUNS,
    body_read_timeout: float = DEFAULT_BODY_READ_TIMEOUT,
    max_llm_calls: int | None = None,
    default_app_name: str | None = None,
    ping_interval: float = 15.0,
    cleanup_timeout: float = 10.0,
    extra_routes: Sequence[BaseRoute] = (),
    public_paths: Sequence[str] = (),
    dev_routes: bool = False,
) -> Starlette:
    """The ADK-compatible HTTP API over ``agents`` (app name → root agent or app), as an ASGI app.

    Each app gets a :class:`~trio_agents.Runner` (``concurrent_runs="reject"``); all of them share
    the services and ``plugins``. An :class:`~trio_agents.App` value brings its own plugins (run
    before ``plugins``) and resumability, under its key's name. ``agents`` may be a zero-argument
    loader, called on first use.
    Serve the app with :func:`trio_agents.server.serve` (HTTP/1.1 on h11 and Trio): its lifespan
    owns the nursery of detached runs and closes plugins and models on shutdown.

    Args:
        artifact_service: defaults to an :class:`~trio_agents.artifacts.InMemoryArtifactService`.
        auth_token: when set, every route except ``/health`` needs ``Authorization: Bearer
            <token>`` (else 401).
        cors_origins: origins allowed by CORS (``"*"`` for any); none by default.
        max_body_bytes: larger request bodies are refused with 413.
        max_detached_runs: runs with ``onDisconnect: "detach"`` in flight at once; more get 503
            with ``Retry-After``.
        body_read_timeout: seconds a request body may take to arrive whole; a slower client
            gets 408 and its connection is closed.
        max_llm_calls: passed to every run's ``RunConfig``.
        default_app_name: the app of run requests without ``appName``.
        ping_interval: seconds of silence after which an SSE stream sends a ``: ping`` comment.
        extra_routes: more routes (e.g. a UI), matched after the API's own.
        public_paths: paths served without the bearer token besides ``/health``; one ending in
            ``*`` opens every path it prefixes (for a UI's static files: see :func:`ui_routes`).
        dev_routes: also serve what ADK's own dev UI calls besides the API (the agent graph,
            per-session traces recorded by a bounded in-memory plugin, telemetry consent, empty
            eval lists, 501 for the rest), and give events served over HTTP ``nodeInfo.path``
            (their author's place in the agent tree); for development, not production: traces
            hold prompts.
    """
    if max_body_bytes <= 0 or max_detached_runs < 0 or not body_read_timeout > 0:
        raise ConfigurationError(
            "max_body_bytes and body_read_timeout must be > 0 and max_detached_runs >= 0"
        )
    body = BodyLimits(max_body_bytes, body_read_timeout)
    traces = SpanRecorder() if dev_routes else None
    core = ServerCore(
        agents,
        session_service=session_service,
        artifact_service=artifact_service or InMemoryArtifactService(),
        memory_service=memory_service,
        plugins=[*plugins, traces] if traces is not None else plugins,
        max_detached_runs=max_detached_runs,
        cleanup_timeout=cleanup_timeout,
        cluster=cluster_of(session_service),
    )
    sessions = SessionRoutes(core, body=body)
    runs = RunRoutes(
        core,
        body=body,
        default_app=default_app_name,
        max_llm_calls=max_llm_calls,
        ping_interval=ping_interval,
    )
    dev = DevRoutes(core, traces, body=body).routes() if traces is not None else []
    api = _routes(sessions, runs)
    app = ApiApp(
        direct=api[:DIRECT_ROUTES],
        routes=[*api, *dev, *extra_routes],
        middleware=_middleware(auth_token, cors_origins, public_paths),
        exception_handlers={
            HTTPError: _http_error,
            HTTPException: _starlette_error,
            SerializationError: _unstorable,
            StoreUnavailableError: _store_unavailable,
        },
        lifespan=_lifespan_of(core),
    )
    core.node_info = dev_routes
    core.traces = traces
    app.state.core = core
    return app


DIRECT_ROUTES = 3
"""The first routes of :func:`_routes`, which every run takes: served without Starlette's
layers (see :class:`ApiApp`)."""


def _routes(sessions: SessionRoutes, runs: RunRoutes) -> list[BaseRoute]:
    s, r = sessions, runs
    sessions_path = "/apps/{app_name}/users/{user_id}/sessions"
    return [  # the routes of a run first (served directly): each request tries them in order
        Route("/run_sse", r.run_sse, methods=["POST"]),
        Route("/run", r.run_json, methods=["POST"]),
        Route(sessions_path, s.create_session, methods=["POST"]),
        Route("/health", s.health, methods=["GET"]),
        Route("/version", s.version, methods=["GET"]),
        Route("/list-apps", s.list_apps, methods=["GET"]),
        Route(sessions_path, s.list_sessions, methods=["GET"]),
        Route(SESSION, s.get_session, methods=["GET"]),
        Route(SESSION, s.create_session_with_id, methods=["POST"]),
        Route(SESSION, s.delete_session, methods=["DELETE"]),
        Route(SESSION, s.patch_session, methods=["PATCH"]),
        Route(SESSION + "/events", r.follow_events, methods=["GET"]),
        Route(SESSION + "/invocations/{invocation_id}/cancel", r.cancel_run, methods=["POST"]),
        Route(SESSION + "/artifacts", s.list_artifacts, methods=["GET"]),
        Route(SESSION + "/artifacts", s.save_artifact, methods=["POST"]),
        Route(ARTIFACT + "/versions", s.list_versions, methods=["GET"]),
        Route(ARTIFACT + "/versions/{version_id}", s.load_artifact_version, methods=["GET"]),
        Route(ARTIFACT, s.load_artifact, methods=["GET"]),
        Route(ARTIFACT, s.delete_artifact, methods=["DELETE"]),
        Route("/apps/{app_name}/users/{user_id}/memory", s.patch_memory, methods=["PATCH"]),
    ]


def _middleware(
    auth_token: str | None, cors_origins: Sequence[str], public_paths: Sequence[str]
) -> list[Middleware]:
    middleware: list[Middleware] = []
    if cors_origins:
        middleware.append(
            Middleware(
                JsonCors,
                allow_origins=list(cors_origins),
                allow_methods=["*"],
                allow_headers=["*"],
                expose_headers=[OUTCOME_HEADER],
            )
        )
    if auth_token is not None:
        open_paths = ("/health", *public_paths)
        middleware.append(Middleware(BearerAuth, token=auth_token, open_paths=open_paths))
    middleware.append(Middleware(RefuseNul))
    return middleware


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPError)
    return error_response(exc)


def _unstorable(request: Request, exc: Exception) -> Response:
    """A value some route let through to a store that refused it: 422 naming where."""
    return error_response(HTTPError(422, str(exc)))


def _store_unavailable(request: Request, exc: Exception) -> Response:
    """The session store cannot answer now (its database is unreachable): 503, retry shortly."""
    return error_response(unavailable(str(exc)))


def _starlette_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(HTTPError(exc.status_code, exc.detail, headers=exc.headers))


def _lifespan_of(
    core: ServerCore,
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        """Load the apps, own the nursery of detached runs; on shutdown cancel them and close."""
        core.load()  # a loader runs at start-up, so a broken app fails it
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(core.cluster.serve, core)
                core.nursery = nursery
                try:
                    yield
                finally:
                    core.nursery = None
                    nursery.cancel_scope.cancel(reason="the server is shutting down")
        finally:
            with trio.CancelScope(shield=True):
                await core.close()

    return lifespan
