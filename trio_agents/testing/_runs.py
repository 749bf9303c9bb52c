"""Running an agent in a test: :func:`collect` a whole run, :func:`normalize` it for goldens."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._content import Content
from .._errors import SessionNotFoundError
from .._events import Event
from .._runner import RunConfig, Runner, RunStream
from ..sessions._base import Session
from ._invariants import check_invariants

__all__ = ["Collected", "collect", "normalize"]


@attrs.frozen
class Collected:
    """What one run delivered and what its session holds afterwards.

    ``events`` are the events the consumer received, partial chunks included, in order;
    ``session`` is the stored session re-read after the run (the whole history); ``error`` is the
    exception the run raised when :func:`collect` was told not to raise it; ``live_state`` is
    the state of the run's live session when the run ended (None if it never started).
    """

    events: list[Event]
    session: Session
    error: Exception | None = None
    live_state: dict[str, Any] | None = None

    def violations(self, *, initial_state: Mapping[str, Any] | None = None) -> list[str]:
        """Every handshake rule the run broke (:func:`check_invariants` on all of the above)."""
        return check_invariants(
            self.events, self.session, initial_state=initial_state, live_state=self.live_state
        )


async def collect(
    runner: Runner,
    *,
    user_id: str,
    session_id: str | None = None,
    new_message: Content | str | None = None,
    state_delta: Mapping[str, Any] | None = None,
    run_config: RunConfig | None = None,
    raise_errors: bool = True,
) -> Collected:
    """Run one invocation to the end; return the delivered events and the stored session.

    Without ``session_id`` a fresh session is created for ``user_id``. With
    ``raise_errors=False`` an exception of the run is returned in :attr:`Collected.error`
    instead of raised, so a failing run's events and session can still be inspected.
    """
    if session_id is None:
        created = await runner.session_service.create_session(
            app_name=runner.app_name, user_id=user_id
        )
        session_id = created.id
    delivered: list[Event] = []
    error: Exception | None = None
    stream: RunStream | None = None
    try:
        async with runner.run(
            user_id=user_id,
            session_id=session_id,
            new_message=new_message,
            state_delta=state_delta,
            run_config=run_config,
        ) as stream:
            async for event in stream:
                delivered.append(event)
    except Exception as exc:
        if raise_errors:
            raise
        error = exc
    live_state = None if stream is None else dict(stream.session.state)
    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id=user_id, session_id=session_id
    )
    if session is None:
        raise SessionNotFoundError(session_id)
    return Collected(delivered, session, error, live_state)


def normalize(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Events as JSON objects for golden comparisons, without what changes from run to run.

    Timestamps are dropped; event ids, invocation ids and function-call ids become ``<id-1>``,
    ``<invocation-1>``, ``<call-1>``, ... in order of first appearance, so the structure stays:
    two events of one invocation share ``<invocation-1>``, and a response (or a long-running id,
    a ``requestedAuthConfigs`` or ``requestedToolConfirmations`` key, or the original call in a
    confirmation request) names the same ``<call-N>`` as its call. Everything else is ADK's JSON
    form (``Event.to_dict()``).
    """
    names: dict[tuple[str, str], str] = {}
    counts: dict[str, int] = {}

    def rename(kind: str, value: str) -> str:
        key = (kind, value)
        if key not in names:
            counts[kind] = counts.get(kind, 0) + 1
            names[key] = f"<{kind}-{counts[kind]}>"
        return names[key]

    out = []
    for event in events:
        data = json.loads(event.to_json())
        data.pop("timestamp", None)
        data["id"] = rename("id", data["id"])
        if "invocationId" in data:
            data["invocationId"] = rename("invocation", data["invocationId"])
        for part in data.get("content", {}).get("parts", []):
            for field in ("functionCall", "functionResponse"):
                if field in part and "id" in part[field]:
                    part[field]["id"] = rename("call", part[field]["id"])
            original = part.get("functionCall", {}).get("args", {}).get("originalFunctionCall")
            if isinstance(original, dict) and isinstance(original.get("id"), str):
                original["id"] = rename("call", original["id"])  # a confirmation request
        if "longRunningToolIds" in data:
            data["longRunningToolIds"] = [rename("call", i) for i in data["longRunningToolIds"]]
        auth = data.get("actions", {}).get("requestedAuthConfigs")
        if auth:  # keyed by the id of the call that asked for credentials
            data["actions"]["requestedAuthConfigs"] = {
                rename("call", key): value for key, value in auth.items()
            }
        asked = data.get("actions", {}).get("requestedToolConfirmations")
        if asked:  # keyed by the id of the call that asked for confirmation
            data["actions"]["requestedToolConfirmations"] = {
                rename("call", key): value for key, value in asked.items()
            }
        out.append(data)
    return out
