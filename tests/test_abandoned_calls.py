"""A run first closes the calls a dead invocation left open (issue 7 crash safety, rule 7)."""

from __future__ import annotations

from trio_agents import Content, Event, InMemoryRunner, LlmAgent, Part
from trio_agents._runner import ABANDONED_REASON
from trio_agents.testing import ScriptedModel


def _call_event(invocation: str, *calls: tuple[str, str], long_running: set[str] | None = None):
    parts = [Part.from_function_call(name, {}, id=call_id) for name, call_id in calls]
    return Event(
        invocation_id=invocation,
        author="a",
        content=Content(role="model", parts=parts),
        long_running_tool_ids=long_running,
    )


async def test_open_calls_of_a_dead_invocation_are_closed_before_the_next_run() -> None:
    model = ScriptedModel(["fine"])
    runner = InMemoryRunner(LlmAgent(name="a", model=model))
    svc = runner.session_service
    session = await svc.create_session(app_name=runner.app_name, user_id="u")
    # What a process killed mid-invocation leaves behind: calls without responses.
    await svc.append_event(
        session, Event(invocation_id="dead", author="user", content=Content.from_text("go"))
    )
    await svc.append_event(
        session, _call_event("dead", ("lookup", "c1"), ("approve", "c2"), long_running={"c2"})
    )
    async with runner.run(user_id="u", session_id=session.id, new_message="again") as events:
        delivered = [e async for e in events]
    stored = await svc.get_session(app_name=runner.app_name, user_id="u", session_id=session.id)
    assert stored is not None
    closing = stored.events[2]
    assert closing.invocation_id == "dead"
    assert [(r.id, dict(r.response)) for r in closing.get_function_responses()] == [
        ("c1", {"error": "cancelled", "reason": ABANDONED_REASON})
    ]
    assert stored.events[3].author == "user"  # then the new run's own user event
    assert [e.text for e in delivered] == ["fine"]
    # The model saw the closed call paired with its response; the long-running one stays open.
    parts = [p for c in model.requests[0].contents for p in c.parts]
    assert [p.function_response.id for p in parts if p.function_response] == ["c1"]


async def test_a_well_formed_history_gets_nothing_extra() -> None:
    runner = InMemoryRunner(LlmAgent(name="a", model=ScriptedModel(["one", "two"])))
    svc = runner.session_service
    session = await svc.create_session(app_name=runner.app_name, user_id="u")
    for message in ("hi", "again"):
        async with runner.run(user_id="u", session_id=session.id, new_message=message) as events:
            async for _ in events:
                pass
    stored = await svc.get_session(app_name=runner.app_name, user_id="u", session_id=session.id)
    assert stored is not None
    assert [e.author for e in stored.events] == ["user", "a", "user", "a"]
