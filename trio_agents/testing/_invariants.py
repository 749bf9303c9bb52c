"""check_invariants: the Runner's handshake rules, checked on a finished run."""

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
    live_state: Mapping[str, Any] | None = None,
    consumer_left: bool = False,
) -> list[str]:
    """Every violation of the handshake rules by one finished run; ``[]`` when it kept them all.

    ``delivered`` is what the consumer received (partial chunks included) and ``session`` the
    stored session re-read afterwards, with its whole history; ``live_state`` is the state of
    the run's live session at its end (``RunStream.session.state``). :func:`collect` gathers
    all three, and :meth:`Collected.violations` checks them. Checked:

    * one order: every stored event of the run (after its user event) was delivered, in the
      same order, and every delivered non-partial event is stored. With ``consumer_left=True``
      (the consumer left the block, or was cancelled, before the run ended) stored events after
      the last one it received may be aftermath it never saw, responses closing open calls and
      content-less error events, and nothing else;
    * partial events are delivered but never stored;
    * the stored state is the fold of ``initial_state`` (the state the session was created with)
      and every stored event's delta, and no ``temp:`` key was persisted;
    * no state change without an event: the live state at the end (``temp:`` keys aside) is
      that same fold. A callback or tool that writes ``session.state`` directly, not through
      its context's ``state``, changes the live state only: nothing stores the change;
    * every function call is answered by a later response unless it is long-running, and every
      response answers an earlier call; error events carry no content;
    * event ids are unique, every delivered event carries the run's invocation id, and
      ``trio.Cancelled`` never became data.

    Other sessions of the same app or user that changed ``app:`` / ``user:`` keys make the fold
    differ; check such sessions with ``initial_state`` holding those keys, or one at a time.
    """
    stored = list(session.events)
    problems: list[str] = []
    problems += _order(delivered, stored, consumer_left)
    problems += _partials(delivered, stored)
    folded = _fold(stored, initial_state or {})
    problems += _temp(stored, session.state)
    problems += _state("the stored state", session.state, folded)
    if live_state is not None:
        problems += _state("the live state at the end of the run", live_state, folded)
    problems += _calls(stored)
    problems += _identity(delivered, stored)
    return problems


def assert_invariants(
    delivered: Sequence[Event],
    session: Session,
    *,
    initial_state: Mapping[str, Any] | None = None,
    live_state: Mapping[str, Any] | None = None,
    consumer_left: bool = False,
) -> None:
    """:func:`check_invariants`, raising ``AssertionError`` that lists every violation."""
    problems = check_invariants(
        delivered,
        session,
        initial_state=initial_state,
        live_state=live_state,
        consumer_left=consumer_left,
    )
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


def _order(delivered: Sequence[Event], stored: Sequence[Event], consumer_left: bool) -> list[str]:
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
    undelivered = after[len(committed) :]
    if not consumer_left:
        return [
            f"delivery: stored {_describe(extra)} of the run was never delivered to the consumer"
            for extra in undelivered
        ]
    return [
        f"aftermath: {_describe(extra)} was stored but never delivered, and it is "
        "neither an error event nor a response closing open calls"
        for extra in undelivered
        if not extra.error_code and not _only_responses(extra)
    ]


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


def _fold(stored: Sequence[Event], initial: Mapping[str, Any]) -> dict[str, Any]:
    """The state the deltas make, from ``initial``, without ``temp:`` keys."""
    folded = dict(initial)
    for event in stored:
        folded.update(event.actions.state_delta)
    return {k: v for k, v in folded.items() if not k.startswith(TEMP_PREFIX)}


def _temp(stored: Sequence[Event], state: Mapping[str, Any]) -> list[str]:
    problems = []
    for event in stored:
        temp = sorted(k for k in event.actions.state_delta if k.startswith(TEMP_PREFIX))
        if temp:
            problems.append(f"temp: {_describe(event)} persisted the keys {temp}")
    temp_state = sorted(k for k in state if k.startswith(TEMP_PREFIX))
    if temp_state:
        problems.append(f"temp: the stored state holds the keys {temp_state}")
    return problems


def _state(what: str, state: Mapping[str, Any], folded: Mapping[str, Any]) -> list[str]:
    visible = {k: v for k, v in state.items() if not k.startswith(TEMP_PREFIX)}
    if visible == folded:
        return []
    differing = sorted(
        key
        for key in visible.keys() | folded.keys()
        if visible.get(key, _MISSING) != folded.get(key, _MISSING)
    )
    return [
        f"state: {what} is not the fold of the stored deltas; keys {differing} differ "
        f"({what.split()[1]} {[visible.get(k, '<missing>') for k in differing]}, folded "
        f"{[folded.get(k, '<missing>') for k in differing]})"
    ]


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
        if event.error_code and event.content is not None:
            problems.append(f"errors: error {_describe(event)} carries content")
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
