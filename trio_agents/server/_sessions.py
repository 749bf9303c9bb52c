"""ADK's session, artifact, app-list and memory routes."""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._content import Part
from .._errors import (
    ArtifactNotFoundError,
    ConfigurationError,
    SerializationError,
    SessionBusyError,
    SessionExistsError,
    StoreUnavailableError,
)
from .._events import Event, EventActions
from .._ids import new_event_id, now
from .._serde import check_event, unstructure
from .._version import __version__
from ..artifacts._base import USER_PREFIX, check_filename
from ..sessions import GetSessionConfig, Session
from ._core import ServerCore
from ._http import (
    BodyLimits,
    Fields,
    HTTPError,
    busy,
    check_reachable,
    json_response,
    parse_record,
    read_json,
    session_json,
    unavailable,
)

__all__ = ["artifact_uri"]


class SessionRoutes:
    """The routes of ADK's ``api_server`` that do not run agents."""

    def __init__(self, core: ServerCore, *, body: BodyLimits) -> None:
        self.core = core
        self.body = body

    # -- server --------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return json_response({"status": "ok"})

    async def version(self, request: Request) -> Response:
        return json_response(
            {
                "version": __version__,
                "language": "python",
                "language_version": platform.python_version(),
            }
        )

    async def list_apps(self, request: Request) -> Response:
        names = sorted(self.core.runners)
        if request.query_params.get("detailed", "").lower() not in ("1", "true", "yes"):
            return json_response(names)
        apps = [self._app_info(name) for name in names]
        return json_response({"apps": apps})

    def _app_info(self, name: str) -> dict[str, Any]:
        agent = self.core.runners[name].agent
        return {
            "name": name,
            "rootAgentName": agent.name,
            "description": agent.description,
            "language": "python",
        }

    # -- sessions ------------------------------------------------------------------------------

    def _json(self, session: Session) -> dict[str, Any]:
        """``session_json`` with each event's ``nodeInfo`` (its author's place in the app)."""
        return session_json(session, paths=self.core.node_paths(session.app_name))

    def _ids(self, request: Request) -> tuple[str, str]:
        app_name = request.path_params["app_name"]
        self.core.runner(app_name)
        return app_name, request.path_params["user_id"]

    async def create_session(self, request: Request) -> Response:
        """Create a session, with a restored history when ``events`` is given: all or nothing
        (a refused event, a store failure or a client that leaves stores neither the session
        nor the ``app:``/``user:`` keys of its state)."""
        app_name, user_id = self._ids(request)
        fields = Fields(await read_json(request, self.body))
        events = _restored_events(fields.items("events"))
        session_id, state = fields.text("sessionId"), fields.mapping("state")
        fields.check_unknown()
        session = await self._create(app_name, user_id, session_id, state, events)
        return json_response(self._json(session))

    async def create_session_with_id(self, request: Request) -> Response:
        """ADK's deprecated ``POST …/sessions/{session_id}`` whose body is the initial state."""
        app_name, user_id = self._ids(request)
        state = await read_json(request, self.body)
        if state is not None and not isinstance(state, dict):
            raise HTTPError(422, "state: expected an object")
        session_id = request.path_params["session_id"]
        return json_response(self._json(await self._create(app_name, user_id, session_id, state)))

    async def _create(
        self,
        app_name: str,
        user_id: str,
        session_id: str | None,
        state: dict[str, Any] | None,
        events: list[Event] | None = None,
    ) -> Session:
        if session_id is not None:
            check_reachable("sessionId", session_id)
        service = self.core.session_service
        try:
            service._check_new(app_name, user_id, session_id, state)
        except SerializationError as exc:  # the ids or the state (an event's is a 422)
            raise HTTPError(400, str(exc)) from exc
        try:
            if events:
                return await service._create_with_history(
                    app_name=app_name,
                    user_id=user_id,
                    state=state,
                    session_id=session_id,
                    events=events,
                )
            return await service.create_session(
                app_name=app_name, user_id=user_id, state=state, session_id=session_id
            )
        except SessionExistsError as exc:
            raise HTTPError(409, str(exc)) from exc
        except ConfigurationError as exc:
            raise HTTPError(400, str(exc)) from exc

    async def get_session(self, request: Request) -> Response:
        return json_response(self._json(await self._session(request)))

    async def _session(self, request: Request) -> Session:
        app_name, user_id = self._ids(request)
        session = await self.core.session_service.get_session(
            app_name=app_name, user_id=user_id, session_id=request.path_params["session_id"]
        )
        if session is None:
            raise HTTPError(404, "Session not found")
        return session

    async def list_sessions(self, request: Request) -> Response:
        app_name, user_id = self._ids(request)
        sessions = await self.core.session_service.list_sessions(app_name=app_name, user_id=user_id)
        return json_response([session_json(s, with_events=False) for s in sessions])

    async def delete_session(self, request: Request) -> Response:
        """Delete a session; 409 while a run is in flight on it (the run would fail)."""
        app_name, user_id = self._ids(request)
        session_id = request.path_params["session_id"]
        service = self.core.session_service
        try:
            async with service.lease(app_name=app_name, user_id=user_id, session_id=session_id):
                await service.delete_session(
                    app_name=app_name, user_id=user_id, session_id=session_id
                )
        except SessionBusyError as exc:
            raise busy(exc) from exc
        except StoreUnavailableError as exc:
            raise unavailable(str(exc)) from exc
        await self._delete_session_artifacts(app_name, user_id, session_id)
        return json_response(None)

    async def _delete_session_artifacts(self, app_name: str, user_id: str, session_id: str) -> None:
        """A deleted session's own artifacts go with it (``user:`` ones belong to the user)."""
        ids = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
        artifacts = self.core.artifact_service
        with _artifact_errors("session_id"):
            for name in await artifacts.list_artifact_keys(**ids):
                if not name.startswith(USER_PREFIX):
                    await artifacts.delete_artifact(**ids, filename=name)

    async def patch_session(self, request: Request) -> Response:
        """Apply ``stateDelta`` as a ``user`` event (invocation ``p-…``), as ADK does.

        409 while a run is in flight on the session: the change would race with the run's own.
        """
        app_name, user_id = self._ids(request)
        fields = Fields(await read_json(request, self.body))
        delta = fields.mapping("stateDelta", required=True)
        session_id = request.path_params["session_id"]
        service = self.core.session_service
        try:
            async with service.lease(app_name=app_name, user_id=user_id, session_id=session_id):
                session = await self._session(request)
                event = Event(
                    invocation_id=f"p-{new_event_id()}",
                    author="user",
                    actions=EventActions(state_delta=delta or {}),
                )
                await service.append_event(session, event)
        except SessionBusyError as exc:
            raise busy(exc) from exc
        except StoreUnavailableError as exc:
            raise unavailable(str(exc)) from exc
        except SerializationError as exc:
            raise HTTPError(422, f"stateDelta: {exc}") from exc
        return json_response(self._json(session))

    async def patch_memory(self, request: Request) -> Response:
        """Add a session to the memory service (``{sessionId}``)."""
        app_name, user_id = self._ids(request)
        memory = self.core.memory_service
        if memory is None:
            raise HTTPError(400, "Memory service is not configured.")
        fields = Fields(await read_json(request, self.body))
        session_id = str(fields.identifier("sessionId", required=True))
        session = await self.core.session_service.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id
        )
        if session is None:
            raise HTTPError(404, "Session not found")
        await memory.add_session_to_memory(session)
        return json_response(None)

    # -- artifacts -----------------------------------------------------------------------------

    def _artifact_ids(self, request: Request) -> dict[str, str]:
        app_name, user_id = self._ids(request)
        return {
            "app_name": app_name,
            "user_id": user_id,
            "session_id": request.path_params["session_id"],
        }

    async def save_artifact(self, request: Request) -> Response:
        """Save a version; 404 when the session does not exist (nothing is written then), or
        was deleted while the version was written (the session's file is removed then, as the
        deletion would have removed it)."""
        ids = self._artifact_ids(request)
        fields = Fields(await read_json(request, self.body))
        filename = check_reachable("filename", str(fields.text("filename", required=True)))
        part = fields.record("artifact", Part, required=True)
        assert part is not None
        metadata = fields.mapping("customMetadata") or {}
        fields.check_unknown()
        try:
            check_filename(filename)
        except ConfigurationError as exc:
            raise HTTPError(400, f"filename: {exc}") from exc
        if not await self._session_exists(ids):
            raise HTTPError(404, "Session not found")
        artifacts = self.core.artifact_service
        with _artifact_errors("filename"):
            version = await artifacts.save_artifact(
                **ids, filename=filename, artifact=part, custom_metadata=metadata
            )
        if not filename.startswith(USER_PREFIX) and not await self._session_exists(ids):
            await artifacts.delete_artifact(**ids, filename=filename)  # else a new session of
            raise HTTPError(404, "Session not found")  # the same id would inherit it
        mime = (
            part.inline_data.mime_type if part.inline_data else "text/plain" if part.text else None
        )
        body: dict[str, Any] = {
            "version": version,
            "canonicalUri": artifact_uri(**ids, filename=filename, version=version),
            "customMetadata": metadata,
            "createTime": now(),
        }
        if mime:
            body["mimeType"] = mime
        return json_response(body)

    async def _session_exists(self, ids: dict[str, str]) -> bool:
        found = await self.core.session_service.get_session(
            **ids, config=GetSessionConfig(num_recent_events=0)
        )
        return found is not None

    async def list_artifacts(self, request: Request) -> Response:
        ids = self._artifact_ids(request)
        with _artifact_errors("path"):
            return json_response(await self.core.artifact_service.list_artifact_keys(**ids))

    async def load_artifact(self, request: Request) -> Response:
        raw = request.query_params.get("version")
        version = None if raw is None else _version(raw, "version", latest=False)
        return await self._load(request, version)

    async def load_artifact_version(self, request: Request) -> Response:
        version = _version(request.path_params["version_id"], "version_id", latest=True)
        return await self._load(request, version)

    async def _load(self, request: Request, version: int | None) -> Response:
        ids = self._artifact_ids(request)
        filename = _filename(request)
        try:
            with _artifact_errors("path"):
                part = await self.core.artifact_service.load_artifact(
                    **ids, filename=filename, version=version
                )
        except ArtifactNotFoundError:
            part = None
        if part is None:
            raise HTTPError(404, "Artifact not found")
        return json_response(unstructure(part))

    async def list_versions(self, request: Request) -> Response:
        ids = self._artifact_ids(request)
        with _artifact_errors("path"):
            versions = await self.core.artifact_service.list_versions(
                **ids, filename=_filename(request)
            )
        return json_response(versions)

    async def delete_artifact(self, request: Request) -> Response:
        ids = self._artifact_ids(request)
        with _artifact_errors("path"):
            await self.core.artifact_service.delete_artifact(**ids, filename=_filename(request))
        return json_response(None)


@contextlib.contextmanager
def _artifact_errors(where: str) -> Iterator[None]:
    """An id or filename the artifact store cannot hold (too long for a file name...) is 400."""
    try:
        yield
    except ConfigurationError as exc:
        raise HTTPError(400, f"{where}: {exc}") from exc


def _filename(request: Request) -> str:
    name: str = request.path_params["artifact_name"]
    try:
        return check_filename(name)
    except ConfigurationError as exc:
        raise HTTPError(400, f"artifact_name: {exc}") from exc


def _version(raw: str, name: str, *, latest: bool) -> int | None:
    if latest and raw == "latest":
        return None
    try:
        return int(raw)
    except ValueError:
        expected = "an integer or 'latest'" if latest else "an integer"
        raise HTTPError(422, f"{name}: expected {expected}, got {raw!r}") from None


def artifact_uri(
    *, app_name: str, user_id: str, session_id: str, filename: str, version: int
) -> str:
    """Where a version lives, in ADK's path layout (``user:`` files belong to the user)."""
    scope = "" if filename.startswith(USER_PREFIX) else f"/sessions/{session_id}"
    return (
        f"artifact://apps/{app_name}/users/{user_id}{scope}/artifacts/{filename}/versions/{version}"
    )


MAX_RESTORED_EVENTS = 10_000
"""Events a session may be created with at most. Each costs the server's one thread about
0.1 ms to check, store and answer: the 800,000 a body under the size limit can hold would stall
every request for more than a minute."""


def _restored_events(items: list[Any]) -> list[Event]:
    """The events of a restored history, each checked, their ids distinct (else 400/422)."""
    if len(items) > MAX_RESTORED_EVENTS:
        raise HTTPError(
            422,
            f"events: {len(items)} events, more than the {MAX_RESTORED_EVENTS} a session may "
            "be created with",
        )
    events = [_restored_event(item, index) for index, item in enumerate(items)]
    seen: dict[str, int] = {}
    for index, event in enumerate(events):
        first = seen.setdefault(event.id, index)
        if first != index:
            raise HTTPError(
                422, f"events[{index}].id: {event.id!r:.80} is also the id of events[{first}]"
            )
        try:
            check_event(event)
        except SerializationError as exc:
            raise HTTPError(422, f"events[{index}]: {exc}") from exc
    return events


def _restored_event(item: Any, index: int) -> Event:
    """An event of a restored history, refused (400) if it claims what only ADK produces."""
    event = parse_record(item, Event, f"events[{index}]")
    if event.long_running_tool_ids:
        raise HTTPError(400, f"events[{index}]: a restored event cannot have long-running tool ids")
    if not event.actions.is_empty():
        raise HTTPError(400, f"events[{index}]: a restored event cannot carry actions")
    return event
