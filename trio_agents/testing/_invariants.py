"""check_invariants: the Runner's handshake rules (ARCHITECTURE §2), checked on a finished run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._events import Event
from .._state import TEMP_PREFIX
from ..sessions._base import Session

__all__ = ["assert_invariants", "check_invariants"]


def check_invariants(
    delivered: Sequence[Event],
    session: Session,
    *,
    initial_state: Mapping[str, Any] | None = None,
) -> list[str]:
    """Every violation of the handshake rules by one finished run; ``[]`` when it kept them all.

    ``delivered`` is what the consumer received (partial chunks included) and ``session`` the
    stored session re-read afterwards, with its whole history (see :func:`collect`). Checked:

    * one order: the delivered non-partial events are exactly the stored events after the run's
      user event, in the same order; whatever is stored after them is aftermath (responses
      closing open calls, content-less error events);
    * partial events are delivered but never stored;
    * the stored state is the fold of ``initial_state`` (the state the session was created with)
      and every stored event's delta, and no ``temp:`` key was persisted;
    * every function call is answered by a later response unless it is long-running, and every
      response answers an earlier call;
    * event ids are unique, every delivered event carries the run's invocation id, and
      ``trio.Cancelled`` never became data.

    Other sessions of the same app or user that changed ``app:`` / ``user:`` keys make the fold
    differ; check such sessions with ``initial_state`` holding those keys, or one at a time.
    """
    stored = list(session.events)
    problems: list[str] = []
    problems += _order(delivered, stored)
    problems += _partials(delivered, stored)
    problems += _state(stored, session.state, initial_state or {})
    problems += _calls(stored)
    problems += _identity(delivered, stored)
    return problems


def assert_invariants(
    delivered: Sequence[Event],
    session: Session,
    *,
    initial_state: Mapping[str, Any] | None = None,
) -> None:
    """:func:`check_invariants`, raising ``AssertionError`` that lists every violation."""
    problems = check_invariants(delivered, session, initial_state=initial_state)
    if problems:
        raise AssertionError("handshake rules broken:\n  " + "\n  ".join(problems))


def _describe(event: Event) -> str:
    return f"event {event.id} (author {event.author!r})"


def _run_start(stored: Sequence[Event]) -> int | None:
    """The index after the run's user event (the last event the user authored)."""
    for index in range(len(stored) - 1, -1, -1):
        if stored[index].author == "user":
            return index + 1
    return None


def _order(delivered: Sequence[Event], stored: Sequence[Event]) -> list[str]:
    start = _run_start(stored)
    if start is None:
        return ["one order: no user event is stored, so the run's history cannot be located"]
    committed = [e for e in delivered if not e.partial]
    after = stored[start:]
    for index, event in enumerate(committed):
        if index >= len(after):
            return [f"one order: delivered {_describe(event)} is not stored"]
        if after[index] != event:
            return [
                f"one order: delivered event {index} after the user event is {_describe(event)}"
                f" but stored event {index} is {_describe(after[index])}"
                + (" (same id, different fields)" if after[index].id == event.id else "")
            ]
    problems = []
    for extra in after[len(committed) :]:
        if extra.error_code:
            if extra.content is not None:
                problems.append(f"aftermath: error {_describe(extra)} carries content")
        elif not _only_responses(extra):
            problems.append(
                f"aftermath: {_describe(extra)} was stored but never delivered, and it is "
                "neither an error event nor a response closing open calls"
            )
    return problems


def _only_responses(event: Event) -> bool:
    parts = event.content.parts if event.content is not None else ()
    return bool(parts) and all(p.function_response is not None for p in parts)


def _partials(delivered: Sequence[Event], stored: Sequence[Event]) -> list[str]:
    problems = [f"partial: {_describe(e)} is partial but stored" for e in stored if e.partial]
    stored_ids = {e.id for e in stored}
    problems += [
        f"partial: delivered partial {_describe(e)} was stored"
        for e in delivered
        if e.partial and e.id in stored_ids
    ]
    return problems


def _state(
    stored: Sequence[Event], state: Mapping[str, Any], initial: Mapping[str, Any]
) -> list[str]:
    problems = []
    folded = {k: v for k, v in initial.items() if not k.startswith(TEMP_PREFIX)}
    for event in stored:
        delta = event.actions.state_delta
        temp = sorted(k for k in delta if k.startswith(TEMP_PREFIX))
        if temp:
            problems.append(f"temp: {_describe(event)} persisted the keys {temp}")
        folded.update(delta)
    folded = {k: v for k, v in folded.items() if not k.startswith(TEMP_PREFIX)}
    temp_state = sorted(k for k in state if k.startswith(TEMP_PREFIX))
    if temp_state:
        problems.append(f"temp: the stored state holds the keys {temp_state}")
    visible = {k: v for k, v in state.items() if not k.startswith(TEMP_PREFIX)}
    if visible != folded:
        differing = sorted(
            key
            for key in visible.keys() | folded.keys()
            if visible.get(key, _MISSING) != folded.get(key, _MISSING)
        )
        problems.append(
            f"state: the stored state is not the fold of the stored deltas; keys {differing} "
            f"differ (stored {[visible.get(k, '<missing>') for k in differing]}, folded "
            f"{[folded.get(k, '<missing>') for k in differing]})"
        )
    return problems


_MISSING = object()


def _calls(stored: Sequence[Event]) -> list[str]:
    problems = []
    open_calls: dict[str, Event] = {}
    called: set[str] = set()
    for event in stored:
        for response in event.get_function_responses():
            if response.id is None:
                continue
            if response.id not in called:
                problems.append(
                    f"calls: {_describe(event)} answers call {response.id!r}, "
                    "which no earlier event made"
                )
            open_calls.pop(response.id, None)
        waiting = event.long_running_tool_ids or frozenset()
        for call in event.get_function_calls():
            if call.id is None:
                problems.append(f"calls: {_describe(event)} stored call {call.name!r} has no id")
                continue
            called.add(call.id)
            if call.id not in waiting:
                open_calls[call.id] = event
    problems += [
        f"calls: call {call_id!r} of {_describe(event)} is never answered"
        for call_id, event in open_calls.items()
    ]
    return problems


def _identity(delivered: Sequence[Event], stored: Sequence[Event]) -> list[str]:
    problems = []
    seen: set[str] = set()
    for event in stored:
        if event.id in seen:
            problems.append(f"ids: {_describe(event)} is stored twice")
        seen.add(event.id)
        if event.error_code == "Cancelled":
            problems.append(f"errors: trio.Cancelled became data in {_describe(event)}")
    start = _run_start(stored)
    if start is not None and delivered:
        invocation = stored[start - 1].invocation_id
        problems += [
            f"ids: delivered {_describe(e)} has invocation id {e.invocation_id!r}, "
            f"not the run's {invocation!r}"
            for e in delivered
            if e.invocation_id != invocation
        ]
    delivered_ids: set[str] = set()
    for event in delivered:
        if event.id in delivered_ids:
            problems.append(f"ids: {_describe(event)} was delivered twice")
        delivered_ids.add(event.id)
    return problems
