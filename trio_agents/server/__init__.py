"""The HTTP API (extra ``server``): ADK's ``api_server`` routes on Starlette, served on h11.

::

    import functools, trio
    from trio_agents.server import create_app, serve
    from trio_agents.sessions import SqliteSessionService

    app = create_app({"weather": root_agent}, session_service=SqliteSessionService("s.db"))
    trio.run(functools.partial(serve, app, host="127.0.0.1", port=8000))

Routes (JSON bodies camelCase, snake_case accepted; errors are ``{"detail": ...}``), with
``S = /apps/{app}/users/{user}/sessions``:

- ``GET /health``, ``GET /version``, ``GET /list-apps[?detailed=true]``;
- ``POST S`` ``{sessionId?, state?, events?}`` (409 if the id is taken), ``GET S`` (without
  events), ``GET S/{session}`` (404), ``PATCH S/{session}`` ``{stateDelta}`` (stored as a ``p-…``
  event), ``DELETE S/{session}``;
- ``POST /run`` ``{appName, userId, sessionId, newMessage, invocationId?, stateDelta?,
  customMetadata?, onDisconnect?}`` → the run's events; ``POST /run_sse`` (same body plus
  ``streaming``) → SSE. With ``invocationId`` (a resumable app) the run continues that
  invocation and ``newMessage`` is optional: function responses in it answer the invocation's
  open calls; a resume that cannot be honoured is 422 naming the invocation or call id;
- ``POST S/{session}/invocations/{invocation_id}/cancel`` → 202, or 404 when not in flight;
- ``GET S/{session}/events?after=N`` (or ``Last-Event-ID: N``) → SSE of the stored events after
  N, then of the run in flight up to its terminal frame;
- ``GET S/{session}/artifacts`` (names), ``POST`` it ``{filename, artifact, customMetadata?}``
  (the metadata is kept with the version);
  ``GET|DELETE S/{session}/artifacts/{name}[?version=]``,
  ``GET S/{session}/artifacts/{name}/versions[/{version|latest}]``;
- ``PATCH /apps/{app}/users/{user}/memory`` ``{sessionId}``: add the session to memory.

SSE frames: ``id: <seq>`` + ``data: <event JSON>`` per event (seq = the event's position in the
session's history; partial chunks carry the last committed one), then exactly one terminal frame:
``event: done``, ``event: cancelled`` or ``event: error`` with ``data: {"invocationId": ...}``
(for ``error``, ADK's string form ``"error": "RuntimeError: boom"`` plus ``"errorDetails": {"type",
"message"}``; for a run that paused, ``"paused": true`` and ``"waitingFor"``: the calls it waits
for, each ``{"id", "name", "args"}``; ``"resumable": true`` on the ``error`` or ``cancelled``
frame of a resumable app). A second run on a busy session gets 409 and stores nothing.
``onDisconnect: "cancel"`` (default) cancels the run when the client goes away (calls left open
are answered, as for the cancel route); ``"detach"`` lets it finish in the server.

``create_app(..., dev_routes=True)`` (what the command line serves) adds the routes ADK's own dev
UI calls besides these: ``GET|POST /config/telemetry``, ``GET /dev/apps/{app}/build_graph`` and
``build_graph_image`` (Graphviz DOT source), ``GET /dev/apps/{app}/debug/trace/session/{session}``
and ``debug/trace/{event_id}`` (spans kept per session, as a :class:`TraceRecorder` keeps them),
empty ``eval_sets``/``eval_results``, 501 for the other evaluation routes, and ``builder``
(empty). With ``extra_routes=adk_ui_routes()`` (``trio-agents web --adk-ui``) the installed
google-adk's UI itself is served at ``/dev-ui/``.

Refusals: 400/422 name the field (a value no store could keep, such as a lone surrogate or
nesting deeper than 100 levels, is 400 before anything is stored); 408 a body slower than
``body_read_timeout``; 413 a body over ``max_body_bytes``; 409 (with ``Retry-After``) a session
another run holds; 503 (with ``Retry-After``) more detached runs than ``max_detached_runs``.
At the HTTP layer (:func:`serve`): 400 a request h11 cannot read, 431 a request head over
``max_header_bytes``; a connection idle, or slow to send its head, past ``keep_alive_timeout``
is closed, and so is one whose client accepts nothing of an answer for ``send_timeout``.

The dev UI (what ``trio-agents web`` serves): ``create_app(..., extra_routes=ui_routes(),
public_paths=UI_PUBLIC_PATHS)`` adds a single static page at ``/dev-ui/`` to pick an app and a
session, chat, follow the live event timeline (parallel branches as lanes, each event's state and
artifact deltas), cancel the run in flight, and answer the calls a paused run waits for
(approve or deny a confirmation request, answer a long-running call with JSON), and resume a
failed or cancelled invocation of a resumable app.
"""

from __future__ import annotations

from .._exports import publish as _publish
from ._adk_ui import adk_ui_routes as adk_ui_routes
from ._app import (
    DEFAULT_BODY_READ_TIMEOUT as DEFAULT_BODY_READ_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_DETACHED_RUNS as DEFAULT_MAX_DETACHED_RUNS,
    create_app as create_app,
)
from ._serve import (
    DEFAULT_BACKLOG as DEFAULT_BACKLOG,
    DEFAULT_KEEP_ALIVE_TIMEOUT as DEFAULT_KEEP_ALIVE_TIMEOUT,
    DEFAULT_MAX_HEADER_BYTES as DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_SEND_TIMEOUT as DEFAULT_SEND_TIMEOUT,
    DEFAULT_SHUTDOWN_TIMEOUT as DEFAULT_SHUTDOWN_TIMEOUT,
    serve as serve,
)
from ._traces import TraceRecorder as TraceRecorder
from ._ui import UI_PATH as UI_PATH, UI_PUBLIC_PATHS as UI_PUBLIC_PATHS, ui_routes as ui_routes

__all__ = [
    "DEFAULT_BACKLOG",
    "DEFAULT_BODY_READ_TIMEOUT",
    "DEFAULT_KEEP_ALIVE_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DETACHED_RUNS",
    "DEFAULT_MAX_HEADER_BYTES",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "TraceRecorder",
    "UI_PATH",
    "UI_PUBLIC_PATHS",
    "adk_ui_routes",
    "create_app",
    "serve",
    "ui_routes",
]

_publish(__name__, globals(), __all__)
