"""check_invariants: each handshake rule it reports, on broken histories.

Every case starts from one clean history (a user event, a state change, a function call and its
response, a partial chunk that was delivered but not stored, a final answer) and breaks exactly
one thing; the report must name that rule, and only what the change broke.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from trio_agents import (
    CallbackContext,
    Content,
    Event,
    EventActions,
    InMemoryRunner,
    LlmAgent,
    ParallelAgent,
    Part,
    SequentialAgent,
)
from trio_agents.models import LlmResponse
from trio_agents.sessions import Session
from trio_agents.testing import (
    ScriptedAgent,
    ScriptedModel,
    Step,
    assert_invariants,
    check_invariants,
    collect,
)

INVOCATION = "e-1"


def _event(event_id: str, **fields: Any) -> Event:
    fields.setdefault("author", "agent")
    fields.setdefault("invocation_id", INVOCATION)
    return Event(id=event_id, **fields)


def _call(call_id: str | None = "c1") -> Part:
    return Part.from_function_call("tool", {"x": 1}, id=call_id)


def _answer(call_id: str = "c1", response: dict[str, Any] | None = None) -> Part:
    return Part.from_function_response("tool", response or {"ok": True}, id=call_id)


@attrs.define
class History:
    """What a run delivered and what its session stored (the run's user event included)."""

    delivered: list[Event]
    stored: list[Event]
    state: dict[str, Any]

    def check(self, **kwargs: Any) -> list[str]:
        session = Session(id="s", app_name="app", user_id="u", state=self.state, events=self.stored)
        return check_invariants(self.delivered, session, **kwargs)

    def replace(self, event_id: str, new: Event, *, where: str = "both") -> None:
        for events in _lists(self, where):
            events[:] = [new if e.id == event_id else e for e in events]

    def drop(self, event_id: str, *, where: str = "both") -> None:
        for events in _lists(self, where):
            events[:] = [e for e in events if e.id != event_id]

    def by_id(self, event_id: str) -> Event:
        return next(e for e in [*self.delivered, *self.stored] if e.id == event_id)


def _lists(history: History, where: str) -> list[list[Event]]:
    return {
        "both": [history.delivered, history.stored],
        "delivered": [history.delivered],
        "stored": [history.stored],
    }[where]


def clean() -> History:
    user = _event("user", author="user", content=Content.from_text("hi"))
    change = _event("change", actions=EventActions(state_delta={"k": 1, "app:a": "x"}))
    call = _event("call", content=Content(role="model", parts=[_call()]))
    answer = _event("answer", content=Content(role="user", parts=[_answer()]))
    chunk = _event("chunk", partial=True, content=Content.from_text("Do", role="model"))
    final = _event("final", content=Content.from_text("Done", role="model"))
    return History(
        delivered=[change, call, answer, chunk, final],
        stored=[user, change, call, answer, final],
        state={"k": 1, "app:a": "x"},
    )


def test_a_clean_history_has_no_violation() -> None:
    assert clean().check() == []


# Each case: how to break the clean history, and the regular expressions of every violation the
# report must then hold (in order).
Breakage = Callable[[History], None]


def order_mismatch(h: History) -> None:
    h.stored[1], h.stored[2] = h.stored[2], h.stored[1]


def stored_differs(h: History) -> None:
    h.replace("final", attrs.evolve(h.by_id("final"), author="other"), where="stored")


def delivered_not_stored(h: History) -> None:
    h.drop("final", where="stored")


def partial_stored(h: History) -> None:
    h.stored.append(h.by_id("chunk"))


def state_not_the_fold(h: History) -> None:
    h.state["k"] = 2


def state_key_without_delta(h: History) -> None:
    h.state["sneaky"] = True


def temp_key_in_a_stored_delta(h: History) -> None:
    leaky = EventActions(state_delta={"k": 1, "app:a": "x", "temp:t": 0})
    h.replace("change", attrs.evolve(h.by_id("change"), actions=leaky))


def temp_key_in_the_stored_state(h: History) -> None:
    h.state["temp:t"] = 0


def unanswered_call(h: History) -> None:
    h.drop("answer")


def response_without_call(h: History) -> None:
    h.drop("call")


def call_without_id(h: History) -> None:
    call = h.by_id("call")
    h.replace("call", attrs.evolve(call, content=Content(role="model", parts=[_call(None)])))


def duplicate_ids(h: History) -> None:
    h.replace("final", attrs.evolve(h.by_id("final"), id="change"))


def wrong_invocation_id(h: History) -> None:
    h.replace("final", attrs.evolve(h.by_id("final"), invocation_id="e-2"))


def cancelled_as_data(h: History) -> None:
    error = _event("err", error_code="Cancelled", error_message="Cancelled")
    h.stored.append(error)
    h.delivered.append(error)


def error_event_with_content(h: History) -> None:
    error = _event("err", error_code="ValueError", content=Content.from_text("x"))
    h.stored.append(error)
    h.delivered.append(error)


def error_event_not_delivered(h: History) -> None:
    h.stored.append(_event("err", error_code="ValueError", error_message="boom"))


def stored_not_delivered(h: History) -> None:
    h.stored.append(_event("ghost", content=Content.from_text("never sent", role="model")))


def no_user_event(h: History) -> None:
    h.drop("user")


CASES: dict[str, tuple[Breakage, list[str]]] = {
    "order-mismatch": (
        order_mismatch,
        [
            r"^one order: delivered event 0 after the user event is event change .* stored event 0 "
            r"is event call"
        ],
    ),
    "stored-differs-from-delivered": (
        stored_differs,
        [r"^one order: delivered event 3 .*event final .* \(same id, different fields\)$"],
    ),
    "delivered-not-stored": (
        delivered_not_stored,
        [r"^one order: delivered event final \(author 'agent'\) is not stored$"],
    ),
    "partial-stored": (
        partial_stored,
        [
            r"^delivery: stored event chunk .* of the run was never delivered to the consumer$",
            r"^partial: event chunk .* is partial but stored$",
            r"^partial: delivered partial event chunk .* was stored$",
        ],
    ),
    "state-not-the-fold": (
        state_not_the_fold,
        [
            r"^state: the stored state is not the fold .* keys \['k'\] differ \(stored \[2\], "
            r"folded \[1\]\)$"
        ],
    ),
    "state-key-without-delta": (
        state_key_without_delta,
        [r"^state: .*keys \['sneaky'\] differ \(stored \[True\], folded \['<missing>'\]\)$"],
    ),
    "temp-key-persisted-in-a-delta": (
        temp_key_in_a_stored_delta,
        [r"^temp: event change .* persisted the keys \['temp:t'\]$"],
    ),
    "temp-key-persisted-in-the-state": (
        temp_key_in_the_stored_state,
        [r"^temp: the stored state holds the keys \['temp:t'\]$"],
    ),
    "unanswered-call": (
        unanswered_call,
        [r"^calls: call 'c1' of event call .* is never answered$"],
    ),
    "response-without-call": (
        response_without_call,
        [r"^calls: event answer .* answers call 'c1', which no earlier event made$"],
    ),
    "call-without-id": (
        call_without_id,
        [
            r"^calls: event call .* stored call 'tool' has no id$",
            r"^calls: event answer .* answers call 'c1', which no earlier event made$",
        ],
    ),
    "duplicate-ids": (
        duplicate_ids,
        [
            r"^ids: event change .* is stored twice$",
            r"^ids: event change .* was delivered twice$",
        ],
    ),
    "wrong-invocation-id": (
        wrong_invocation_id,
        [r"^ids: delivered event final .* has invocation id 'e-2', not the run's 'e-1'$"],
    ),
    "cancelled-as-data": (
        cancelled_as_data,
        [r"^errors: trio.Cancelled became data in event err"],
    ),
    "error-event-with-content": (
        error_event_with_content,
        [r"^errors: error event err .* carries content$"],
    ),
    "stored-but-never-delivered": (
        stored_not_delivered,
        [r"^delivery: stored event ghost .* of the run was never delivered to the consumer$"],
    ),
    "error-event-stored-but-never-delivered": (
        error_event_not_delivered,
        [r"^delivery: stored event err \(author 'agent'\) of the run was never delivered"],
    ),
    "no-user-event": (
        no_user_event,
        [r"^one order: no user event is stored"],
    ),
}


@pytest.mark.parametrize(("breakage", "expected"), CASES.values(), ids=CASES.keys())
def test_each_broken_rule_is_reported(breakage: Breakage, expected: list[str]) -> None:
    history = clean()
    breakage(history)
    problems = history.check()
    assert len(problems) == len(expected), problems
    for problem, pattern in zip(problems, expected, strict=True):
        assert re.search(pattern, problem), (pattern, problem)


def test_assert_invariants_lists_every_violation() -> None:
    history = clean()
    unanswered_call(history)
    temp_key_in_the_stored_state(history)
    session = Session(
        id="s", app_name="app", user_id="u", state=history.state, events=history.stored
    )
    with pytest.raises(AssertionError) as info:
        assert_invariants(history.delivered, session)
    message = str(info.value)
    assert message.startswith("handshake rules broken:")
    assert "temp: the stored state holds" in message
    assert "calls: call 'c1'" in message


def test_what_a_run_leaves_behind_after_its_consumer_left_is_allowed() -> None:
    """Aftermath: once the consumer has left, a committed response closing an open call and a
    content-less error event may follow the delivered events; nothing else may."""
    history = clean()
    history.drop("answer")
    closing = _answer(response={"error": "cancelled"})
    history.stored.append(_event("closing", content=Content(role="user", parts=[closing])))
    history.stored.append(_event("err", error_code="ValueError", error_message="boom"))
    assert history.check(consumer_left=True) == []
    assert history.check() == [
        "delivery: stored event closing (author 'agent') of the run was never delivered to the "
        "consumer",
        "delivery: stored event err (author 'agent') of the run was never delivered to the "
        "consumer",
    ]
    stored_not_delivered(history)
    assert [p.split(" (")[0] for p in history.check(consumer_left=True)] == [
        "aftermath: event ghost"
    ]


def test_a_run_record_missing_its_error_event_is_flagged() -> None:
    """A failed run whose consumer got everything but the error event: stored, not delivered."""
    user = _event("user", author="user", content=Content.from_text("hi"))
    one = _event("one", content=Content.from_text("one", role="model"))
    error = _event("err", error_code="ValueError", error_message="boom")
    session = Session(id="s", app_name="app", user_id="u", state={}, events=[user, one, error])
    problems = check_invariants([one], session)
    assert problems == [
        "delivery: stored event err (author 'agent') of the run was never delivered to the consumer"
    ]
    assert check_invariants([one, error], session) == []


def test_a_live_state_that_is_not_the_fold_is_flagged() -> None:
    history = clean()
    assert history.check(live_state={"k": 1, "app:a": "x", "temp:t": 5}) == []
    assert history.check(live_state={"k": 1, "app:a": "x", "count": 1}) == [
        "state: the live state at the end of the run is not the fold of the stored deltas; "
        "keys ['count'] differ (live [1], folded ['<missing>'])"
    ]


def test_long_running_calls_may_stay_open() -> None:
    history = clean()
    history.drop("answer")
    history.replace("call", attrs.evolve(history.by_id("call"), long_running_tool_ids={"c1"}))
    assert history.check() == []


def test_the_initial_state_joins_the_fold() -> None:
    history = clean()
    history.state["given"] = 1
    assert [p.split(";")[0] for p in history.check()] == [
        "state: the stored state is not the fold of the stored deltas"
    ]
    assert history.check(initial_state={"given": 1, "temp:dropped": 0}) == []


def test_earlier_runs_of_the_session_are_history_not_this_run() -> None:
    history = clean()
    earlier = [
        _event("old-user", author="user", invocation_id="e-0"),
        _event("old", invocation_id="e-0", actions=EventActions(state_delta={"k": 0})),
    ]
    history.stored[:0] = earlier
    assert history.check() == []


# -- real runs -------------------------------------------------------------------------------------


def weather(city: str) -> str:
    """Weather.

    Args:
        city: Where.
    """
    return f"sunny in {city}"


async def test_real_runs_keep_every_rule() -> None:
    model = ScriptedModel([_model_calls("weather", {"city": "Oslo"}), "It is sunny."])
    root = SequentialAgent(
        name="root",
        sub_agents=[
            ParallelAgent(
                name="par",
                sub_agents=[
                    ScriptedAgent(name="a", script=["emit", "call", Step("emit", scope="temp:")]),
                    ScriptedAgent(name="b", script=["partial", Step("emit", scope="user:")]),
                ],
            ),
            LlmAgent(name="llm", model=model, tools=[weather]),
        ],
    )
    runner = InMemoryRunner(root)
    result = await collect(runner, user_id="u", new_message="go")
    assert result.error is None
    assert check_invariants(result.events, result.session) == []
    assert len(result.events) == 9


def _model_calls(name: str, args: dict[str, Any]) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=[Part.from_function_call(name, args)]))


async def test_a_failed_run_keeps_every_rule() -> None:
    root = ParallelAgent(
        name="par",
        sub_agents=[
            ScriptedAgent(name="ok", script=["emit", Step("call", seconds=0)]),
            ScriptedAgent(name="bad", script=["emit", "raise"]),
        ],
    )
    result = await collect(InMemoryRunner(root), user_id="u", new_message="go", raise_errors=False)
    assert result.error is not None
    assert check_invariants(result.events, result.session) == []
    assert [e.author for e in result.session.events if e.error_code] == ["bad"]


def count_directly(callback_context: CallbackContext) -> None:
    """A user mistake: the session's state, not the context's, so no event records it."""
    state = callback_context.session.state
    state["trips"] = state.get("trips", 0) + 1


def count_through_the_context(callback_context: CallbackContext) -> None:
    callback_context.state["trips"] = callback_context.state.get("trips", 0) + 1


@pytest.mark.parametrize(
    ("callback", "problems"),
    [
        (
            count_directly,
            [
                "state: the live state at the end of the run is not the fold of the stored "
                "deltas; keys ['trips'] differ (live [1], folded ['<missing>'])"
            ],
        ),
        (count_through_the_context, []),
    ],
)
async def test_a_state_change_without_an_event_is_flagged(
    callback: Callable[[CallbackContext], None], problems: list[str]
) -> None:
    agent = ScriptedAgent(name="trip", script=["emit"], after_agent_callback=callback)
    result = await collect(InMemoryRunner(agent), user_id="u", new_message="go")
    assert result.live_state is not None and result.live_state.get("trips") == 1
    assert result.violations() == problems
