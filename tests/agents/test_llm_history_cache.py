"""The LLM history is built incrementally and kept across invocations (issue 3 speed, W5).

The cache must never change what the model sees: these tests compare against a fresh build.
"""

from __future__ import annotations

from hypothesis import given, strategies as st

from trio_agents import Content, Event, InMemoryRunner, LlmAgent, Part, RunConfig
from trio_agents.agents._llm_contents import History
from trio_agents.sessions import GetSessionConfig
from trio_agents.testing import ScriptedModel


def texts(contents: list[Content]) -> list[str]:
    return [p.text or "" for c in contents for p in c.parts]


async def _turns(runner: InMemoryRunner, session_id: str, *messages: str, **kw: object) -> None:
    for message in messages:
        async with runner.run(
            user_id="u",
            session_id=session_id,
            new_message=message,
            **kw,  # type: ignore[arg-type]
        ) as events:
            async for _ in events:
                pass


async def test_each_turn_sees_the_whole_conversation() -> None:
    model = ScriptedModel(lambda request: f"answer {len(request.contents)}")
    runner = InMemoryRunner(LlmAgent(name="a", model=model))
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    await _turns(runner, session.id, "one", "two", "three")
    assert texts(model.requests[-1].contents) == ["one", "answer 1", "two", "answer 3", "three"]


async def test_a_recreated_session_with_the_same_id_starts_a_fresh_history() -> None:
    model = ScriptedModel(lambda request: "ok")
    runner = InMemoryRunner(LlmAgent(name="a", model=model))
    svc, app = runner.session_service, runner.app_name
    await svc.create_session(app_name=app, user_id="u", session_id="s")
    await _turns(runner, "s", "old one", "old two")
    await svc.delete_session(app_name=app, user_id="u", session_id="s")
    await svc.create_session(app_name=app, user_id="u", session_id="s")
    await _turns(runner, "s", "new")
    assert texts(model.requests[-1].contents) == ["new"]


async def test_a_window_of_recent_events_is_what_the_model_sees() -> None:
    """R-ST-8 windows change the loaded history; the cached one must not leak older events."""
    model = ScriptedModel(lambda request: "ok")
    runner = InMemoryRunner(LlmAgent(name="a", model=model))
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    await _turns(runner, session.id, "one", "two")
    window = RunConfig(get_session_config=GetSessionConfig(num_recent_events=2))
    await _turns(runner, session.id, "three", run_config=window)
    assert texts(model.requests[-1].contents) == ["two", "ok", "three"]


def _event(author: str, text: str, index: int) -> Event:
    return Event(id=f"e{index}", author=author, content=Content.from_text(text, role="model"))


@given(
    script=st.lists(st.tuples(st.sampled_from(["user", "a", "b"]), st.text(max_size=3))),
    cuts=st.lists(st.integers(0, 30), max_size=5),
)
def test_incremental_updates_equal_one_fresh_build(
    script: list[tuple[str, str]], cuts: list[int]
) -> None:
    events = [_event(author, text, i) for i, (author, text) in enumerate(script)]
    incremental = History("a", None)
    for cut in sorted(cuts):
        incremental.update(events[:cut])
    incremental.update(events)
    fresh = History("a", None)
    fresh.update(events)
    assert incremental.request_contents("default") == fresh.request_contents("default")
    assert incremental.request_contents("none") == fresh.request_contents("none")


def test_a_different_sequence_resets_the_history() -> None:
    first = [_event("user", "x", 0), _event("a", "y", 1)]
    other = [Event(id="z0", author="user", content=Content(role="user", parts=[Part(text="q")]))]
    history = History("a", None)
    history.update(first)
    history.update(other)
    assert texts(history.request_contents("default")) == ["q"]
