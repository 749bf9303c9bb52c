"""ADK's session, artifact, app-list and memory routes."""

from __future__ import annotations

import platform
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
)
from .._events import Event, EventActions
from .._ids import new_event_id, now
from .._serde import unstructure
from .._version import __version__
from ..artifacts._base import USER_PREFIX, check_filename
from ..sessions import Session
from ._core import ServerCore
from ._http import Fields, HTTPError, json_response, parse_record, read_json, session_json

__all__ = ["artifact_uri"]


class SessionRoutes:
    """The routes of ADK's ``api_server`` that do not run agents."""

    def __init__(self, core: ServerCore, *, max_body_bytes: int) -> None:
        self.core = core
        self.max_body_bytes = max_body_bytes

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
        app_name, user_id = self._ids(request)
        fields = Fields(await read_json(request, limit=self.max_body_bytes))
        events = [_restored_event(item, index) for index, item in enumerate(fields.items("events"))]
        session_id, state = fields.text("sessionId"), fields.mapping("state")
        fields.check_unknown()
        session = await self._create(app_name, user_id, session_id, state)
        for event in events:
            await self.core.session_service.append_event(session, event)
        return json_response(self._json(session))

    async def create_session_with_id(self, request: Request) -> Response:
        """ADK's deprecated ``POST …/sessions/{session_id}`` whose body is the initial state."""
        app_name, user_id = self._ids(request)
        state = await read_json(request, limit=self.max_body_bytes)
        if state is not None and not isinstance(state, dict):
            raise HTTPError(422, "state: expected an object")
        session_id = request.path_params["session_id"]
        return json_response(self._json(await self._create(app_name, user_id, session_id, state)))

    async def _create(
        self, app_name: str, user_id: str, session_id: str | None, state: dict[str, Any] | None
    ) -> Session:
        try:
            return await self.core.session_service.create_session(
                app_name=app_name, user_id=user_id, state=state, session_id=session_id
            )
        except SessionExistsError as exc:
            raise HTTPError(409, str(exc)) from exc
        except (ConfigurationError, SerializationError) as exc:
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
            raise HTTPError(409, str(exc)) from exc
        return json_response(None)

    async def patch_session(self, request: Request) -> Response:
        """Apply ``stateDelta`` as a ``user`` event (invocation ``p-…``), as ADK does.

        409 while a run is in flight on the session: the change would race with the run's own.
        """
        app_name, user_id = self._ids(request)
        fields = Fields(await read_json(request, limit=self.max_body_bytes))
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
            raise HTTPError(409, str(exc)) from exc
        return json_response(self._json(session))

    async def patch_memory(self, request: Request) -> Response:
        """Add a session to the memory service (``{sessionId}``)."""
        app_name, user_id = self._ids(request)
        memory = self.core.memory_service
        if memory is None:
            raise HTTPError(400, "Memory service is not configured.")
        fields = Fields(await read_json(request, limit=self.max_body_bytes))
        session_id = str(fields.text("sessionId", required=True))
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
        ids = self._artifact_ids(request)
        fields = Fields(await read_json(request, limit=self.max_body_bytes))
        filename = str(fields.text("filename", required=True))
        part = fields.record("artifact", Part, required=True)
        assert part is not None
        fields.mapping("customMetadata")  # accepted for ADK clients; not stored
        fields.check_unknown()
        try:
            check_filename(filename)
        except ConfigurationError as exc:
            raise HTTPError(400, f"filename: {exc}") from exc
        version = await self.core.artifact_service.save_artifact(
            **ids, filename=filename, artifact=part
        )
        mime = (
            part.inline_data.mime_type if part.inline_data else "text/plain" if part.text else None
        )
        body: dict[str, Any] = {
            "version": version,
            "canonicalUri": artifact_uri(**ids, filename=filename, version=version),
            "customMetadata": {},
            "createTime": now(),
        }
        if mime:
            body["mimeType"] = mime
        return json_response(body)

    async def list_artifacts(self, request: Request) -> Response:
        ids = self._artifact_ids(request)
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
        versions = await self.core.artifact_service.list_versions(
            **ids, filename=_filename(request)
        )
        return json_response(versions)

    async def delete_artifact(self, request: Request) -> Response:
        ids = self._artifact_ids(request)
        await self.core.artifact_service.delete_artifact(**ids, filename=_filename(request))
        return json_response(None)


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


def _restored_event(item: Any, index: int) -> Event:
    """An event of a restored history, refused (400) if it claims what only ADK produces."""
    event = parse_record(item, Event, f"events[{index}]")
    if event.long_running_tool_ids:
        raise HTTPError(400, f"events[{index}]: a restored event cannot have long-running tool ids")
    if not event.actions.is_empty():
        raise HTTPError(400, f"events[{index}]: a restored event cannot carry actions")
    return event
