"""LlmAgent: the step loop (R-LLM-2), request assembly (R-LLM-3), history (R-LLM-7, R-LLM-8),
model resolution (R-LLM-9), empty responses (R-LLM-6) and the call budget (R-RUN-10)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.llm_helpers import (
    Chat,
    call,
    calls,
    chat,
    fc,
    identity,
    kinds,
    model_text,
    texts_of,
)
from trio_agents import (
    ConfigurationError,
    Content,
    LlmAgent,
    LlmCallLimitError,
    ModelError,
    ParallelAgent,
    Part,
    RunConfig,
    SequentialAgent,
)
from trio_agents.models import LlmRequest, LlmResponse, register_model
from trio_agents.testing import ScriptedModel


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


# -- the step loop (R-LLM-2) ---------------------------------------------------------------------


async def test_steps_repeat_model_then_tools_until_a_final_answer_r_llm_2() -> None:
    model = ScriptedModel([fc("add", {"a": 1, "b": 2}), fc("lookup", {"q": "x"}), "All done."])
    events = await chat(LlmAgent(name="a", model=model, tools=[add, lookup]))
    assert kinds(events) == ["FC:add", "FR:add", "FC:lookup", "FR:lookup", "T:All done."]
    assert [e.author for e in events] == ["a"] * 5
    assert [e.is_final_response() for e in events] == [False, False, False, False, True]
    assert len(model.requests) == 3
    # Each step feeds the previous call and its result back to the model.
    assert [len(r.contents) for r in model.requests] == [1, 3, 5]
    second = model.requests[2].contents
    assert second[3].parts[0].function_call is not None
    assert second[4].parts[0].function_response is not None
    assert dict(second[4].parts[0].function_response.response) == {"result": "found x"}


async def test_a_text_answer_ends_the_loop_after_one_model_call_r_llm_2() -> None:
    model = ScriptedModel(["Hello!"])
    events = await chat(LlmAgent(name="a", model=model))
    assert kinds(events) == ["T:Hello!"]
    assert len(model.requests) == 1


async def test_function_calls_get_adk_ids_matched_by_the_responses_r_ev_6() -> None:
    model = ScriptedModel([calls(call("lookup", {"q": "1"}), call("add", {"a": 1, "b": 1})), "ok"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[add, lookup]))
    fc_event, fr_event, _ = await session.send()
    call_ids = [c.id for c in fc_event.get_function_calls()]
    assert all(i is not None and i.startswith("adk-") for i in call_ids)
    assert len(set(call_ids)) == 2
    assert [r.id for r in fr_event.get_function_responses()] == call_ids
    stored = await session.stored()
    assert [c.id for c in stored[0].get_function_calls()] == call_ids


async def test_tools_added_after_construction_are_offered() -> None:
    # ADK reads an agent's tools at every step: a function appended to `agent.tools`, or a new
    # list, is offered (and wrapped) from the next model call on.
    model = ScriptedModel([fc("add", {"a": 1, "b": 2}), "ok", fc("lookup", {"q": "x"}), "ok"])
    agent = LlmAgent(name="a", model=model)
    agent.tools.append(add)
    session = await Chat.start(agent)
    first = await session.send()
    assert [r.response for r in first[1].get_function_responses()] == [{"result": 3}]
    assert [d.name for d in model.requests[0].tools] == ["add"]
    agent.tools = [lookup]
    second = await session.send("again")
    assert [r.response for r in second[1].get_function_responses()] == [{"result": "found x"}]
    assert [d.name for d in model.requests[-1].tools] == ["lookup"]


async def test_a_model_given_call_id_is_kept_r_ev_6() -> None:
    model = ScriptedModel([fc("lookup", {"q": "1"}, id="call-7"), "ok"])
    events = await chat(LlmAgent(name="a", model=model, tools=[lookup]))
    assert events[0].get_function_calls()[0].id == "call-7"
    assert events[1].get_function_responses()[0].id == "call-7"


# -- empty responses (R-LLM-6) -------------------------------------------------------------------


async def test_a_response_without_content_yields_no_event_and_ends_the_loop_r_llm_6() -> None:
    model = ScriptedModel([LlmResponse(), "never"])
    session = await Chat.start(LlmAgent(name="a", model=model))
    assert await session.send() == []
    assert len(model.requests) == 1
    assert await session.stored() == []


@pytest.mark.parametrize(
    "response",
    [
        LlmResponse(finish_reason="STOP"),
        LlmResponse(content=Content(role="model", parts=()), finish_reason="STOP"),
        LlmResponse(content=Content.from_text("  \n ", role="model"), finish_reason="STOP"),
        model_text(thought=("thinking only",)),
    ],
    ids=["no-content", "no-parts", "whitespace", "thought-only"],
)
async def test_stop_without_meaningful_content_is_a_final_error_event_r_llm_6(
    response: LlmResponse,
) -> None:
    model = ScriptedModel([response, "never"])
    session = await Chat.start(LlmAgent(name="a", model=model, output_key="out"))
    (event,) = await session.send()
    assert event.error_code == "MODEL_RETURNED_NO_CONTENT"
    # ADK 2.13's messages: one for no parts at all, one for parts that say nothing.
    parts = response.content.parts if response.content else ()
    assert event.error_message == (
        "The model returned no actionable content (finish_reason=STOP with thought-only or "
        "whitespace-only parts)."
        if parts
        else "The model returned no content (finish_reason=STOP with empty parts)."
    )
    assert event.is_final_response()
    assert len(model.requests) == 1
    stored = await session.session()
    assert [e.id for e in stored.events[1:]] == [event.id]
    assert "out" not in stored.state


async def test_an_empty_stop_keeps_the_models_own_error_message() -> None:
    response = LlmResponse(finish_reason="STOP", error_message="filtered upstream")
    (event,) = await chat(LlmAgent(name="a", model=ScriptedModel([response])))
    assert (event.error_code, event.error_message) == (
        "MODEL_RETURNED_NO_CONTENT",
        "filtered upstream",
    )


async def test_a_function_call_with_stop_is_meaningful_content_r_llm_6() -> None:
    response = LlmResponse(
        content=Content(role="model", parts=[call("lookup", {"q": "z"})]), finish_reason="STOP"
    )
    model = ScriptedModel([response, "done"])
    events = await chat(LlmAgent(name="a", model=model, tools=[lookup]))
    assert kinds(events) == ["FC:lookup", "FR:lookup", "T:done"]


# -- request assembly (R-LLM-3) ------------------------------------------------------------------


async def test_request_carries_model_instruction_identity_tools_and_contents_r_llm_3() -> None:
    model = ScriptedModel(["ok"], model="m-1")
    agent = LlmAgent(
        name="helper",
        model=model,
        description="Answers questions.",
        instruction="Be brief.",
        tools=[add, lookup],
        generate_content_config={"temperature": 0.2},
    )
    await chat(agent, "What is 2+2?")
    (request,) = model.requests
    assert request.model == "m-1"
    assert request.system_instruction == "Be brief.\n\n" + identity("helper", "Answers questions.")
    assert [t.name for t in request.tools] == ["add", "lookup"]  # no transfer tool: no targets
    assert request.tools[0].description == "Add two numbers."
    assert request.generation_config == {"temperature": 0.2}
    assert request.labels == {"adk_agent_name": "helper"}
    assert request.response_schema is None
    assert request.contents == [Content.from_text("What is 2+2?", role="user")]


async def test_identity_alone_without_instruction_or_description_r_llm_3() -> None:
    model = ScriptedModel(["ok"])
    await chat(LlmAgent(name="plain", model=model))
    assert model.requests[0].system_instruction == identity("plain")
    assert model.requests[0].tools == []


async def test_global_instruction_of_the_root_comes_first_r_tpl_2() -> None:
    model = ScriptedModel(["ok"])
    leaf = LlmAgent(name="leaf", model=model, instruction="Leaf {topic}.")
    root = LlmAgent(
        name="root",
        model=ScriptedModel([fc("transfer_to_agent", {"agent_name": "leaf"})]),
        global_instruction="Global {topic}.",
        sub_agents=[leaf],
    )
    await chat(root, state={"topic": "cats"})
    (request,) = model.requests
    assert request.labels == {"adk_agent_name": "leaf"}
    assert request.system_instruction is not None
    assert request.system_instruction.startswith(
        "Global cats.\n\nLeaf cats.\n\n" + identity("leaf") + "\n\n"
    )


async def test_global_instruction_provider_bypasses_templating_r_tpl_2() -> None:
    model = ScriptedModel(["ok"])
    agent = LlmAgent(
        name="a", model=model, global_instruction=lambda ctx: "{literal}", instruction="Own."
    )
    await chat(agent)
    assert model.requests[0].system_instruction == "{literal}\n\nOwn.\n\n" + identity("a")


async def test_each_request_gets_its_own_copy_of_generate_content_config_r_llm_3() -> None:
    def edit(*, callback_context: Any, llm_request: LlmRequest) -> None:
        llm_request.generation_config["temperature"] = 0.9

    model = ScriptedModel([fc("lookup", {"q": "a"}), "ok"])
    agent = LlmAgent(
        name="a",
        model=model,
        tools=[lookup],
        generate_content_config={"temperature": 0.1},
        before_model_callback=edit,
    )
    await chat(agent)
    assert agent.generate_content_config == {"temperature": 0.1}
    assert [r.generation_config for r in model.requests] == [{"temperature": 0.9}] * 2


@pytest.mark.parametrize("key", ["tools", "system_instruction", "response_schema"])
def test_generate_content_config_must_not_set_agent_fields(key: str) -> None:
    with pytest.raises(ConfigurationError, match=key):
        LlmAgent(name="a", model=ScriptedModel([]), generate_content_config={key: 1})


def test_invalid_llm_agent_configuration_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="include_contents"):
        LlmAgent(name="a", include_contents="some")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="neither a tool nor a function"):
        LlmAgent(name="a", tools=[42])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="before_model_callback"):
        LlmAgent(name="a", before_model_callback=lambda request: None)


# -- history (R-LLM-8) ---------------------------------------------------------------------------


async def test_history_replays_earlier_turns_with_roles_r_llm_8() -> None:
    model = ScriptedModel([fc("lookup", {"q": "a"}), "first", "second"])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[lookup]))
    await session.send("one")
    await session.send("two")
    contents = model.requests[-1].contents
    assert [c.role for c in contents] == ["user", "model", "user", "model", "user"]
    assert contents[0] == Content.from_text("one", role="user")
    assert contents[1].parts[0].function_call is not None
    assert contents[2].parts[0].function_response is not None
    assert texts_of(contents[3]) == ["first"]
    assert contents[4] == Content.from_text("two", role="user")


async def test_other_agents_events_are_retold_as_user_context_r_llm_8() -> None:
    first = LlmAgent(
        name="first",
        model=ScriptedModel(
            [fc("lookup", {"q": "x"}), model_text("first says hi", thought=("SECRET",))]
        ),
        tools=[lookup],
    )
    second_model = ScriptedModel(["second answers"])
    second = LlmAgent(name="second", model=second_model)
    await chat(SequentialAgent(name="seq", sub_agents=[first, second]), "question")
    contents = second_model.requests[0].contents
    assert contents[0] == Content.from_text("question", role="user")
    retold = contents[1:]
    assert [c.role for c in retold] == ["user", "user", "user"]
    assert all(texts_of(c)[0].startswith("For context") for c in retold)
    lines = [line for c in retold for line in texts_of(c)[1:]]
    assert lines[0].startswith("[first] called tool `lookup`")
    assert '{"q": "x"}' in lines[0]
    assert lines[1].startswith("[first] `lookup` tool returned result")
    assert "found x" in lines[1]
    assert lines[2] == "[first] said: first says hi"
    # Thoughts of other agents are dropped; no function-call parts leak into the request.
    assert not any("SECRET" in line for line in lines)
    assert all(p.function_call is None and p.function_response is None for c in retold
               for p in c.parts)  # fmt: skip


async def test_events_without_content_are_not_sent_to_the_model_r_llm_8() -> None:
    def write_state(*, callback_context: Any) -> None:
        callback_context.state["k"] = 1  # produces a content-less state event

    model = ScriptedModel(["ok"])
    agent = LlmAgent(name="a", model=model, before_agent_callback=write_state)
    session = await Chat.start(agent)
    events = await session.send()
    assert kinds(events) == ["-", "T:ok"]
    assert model.requests[0].contents == [Content.from_text("hi", role="user")]


async def test_parallel_branches_do_not_see_each_other_r_llm_8_r_br_4() -> None:
    model_a = ScriptedModel(["A1", "A2"])
    model_b = ScriptedModel(["B1", "B2"])
    model_m = ScriptedModel(["M1", "M2"])
    branches = [
        LlmAgent(name="A", model=model_a, output_key="a"),
        LlmAgent(name="B", model=model_b, output_key="b"),
    ]
    merge = LlmAgent(name="M", model=model_m, instruction="a={a} b={b}")
    root = SequentialAgent(
        name="seq", sub_agents=[ParallelAgent(name="par", sub_agents=branches), merge]
    )
    session = await Chat.start(root)
    first = await session.send("hi")
    assert {(e.author, e.branch) for e in first} == {("A", "par.A"), ("B", "par.B"), ("M", None)}
    await session.send("again")

    # M (after the merge) sees both branches' outputs, in its instruction and as context.
    assert model_m.requests[0].system_instruction is not None
    assert model_m.requests[0].system_instruction.startswith("a=A1 b=B1")
    m_lines = [line for c in model_m.requests[0].contents for line in texts_of(c)]
    assert "[A] said: A1" in m_lines
    assert "[B] said: B1" in m_lines

    # In turn 2, A sees its own reply (as model) and M's (as context), never B's.
    contents = model_a.requests[1].contents
    assert [texts_of(c) for c in contents] == [
        ["hi"],
        ["A1"],
        ["For context:", "[M] said: M1"],
        ["again"],
    ]
    assert [c.role for c in contents] == ["user", "model", "user", "user"]


# -- include_contents (R-LLM-7) ------------------------------------------------------------------


async def test_include_contents_none_sends_only_the_current_turn_r_llm_7() -> None:
    model = ScriptedModel(["first", fc("lookup", {"q": "a"}), "second"])
    agent = LlmAgent(name="a", model=model, tools=[lookup], include_contents="none")
    session = await Chat.start(agent)
    await session.send("one")
    await session.send("two")
    assert model.requests[1].contents == [Content.from_text("two", role="user")]
    # The agent's own steps in the current turn are included.
    contents = model.requests[2].contents
    assert contents[0] == Content.from_text("two", role="user")
    assert [c.role for c in contents] == ["user", "model", "user"]
    assert contents[1].parts[0].function_call is not None
    assert contents[2].parts[0].function_response is not None


async def test_include_contents_none_turn_starts_at_another_agents_message_r_llm_7() -> None:
    second_model = ScriptedModel(["second"])
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="first", model=ScriptedModel(["first says"])),
            LlmAgent(name="second", model=second_model, include_contents="none"),
        ],
    )
    await chat(seq, "question")
    (request,) = second_model.requests
    assert [texts_of(c) for c in request.contents] == [["For context:", "[first] said: first says"]]


async def test_include_contents_default_sends_everything_r_llm_7() -> None:
    model = ScriptedModel(["first", "second"])
    session = await Chat.start(LlmAgent(name="a", model=model))
    await session.send("one")
    await session.send("two")
    assert [texts_of(c) for c in model.requests[1].contents] == [["one"], ["first"], ["two"]]


# -- model resolution (R-LLM-9) ------------------------------------------------------------------


def test_an_agent_without_model_inherits_the_nearest_llm_ancestors_r_llm_9() -> None:
    top_model = ScriptedModel([])
    mid_model = ScriptedModel([])
    leaf = LlmAgent(name="leaf")
    mid = LlmAgent(name="mid", model=mid_model, sub_agents=[leaf])
    LlmAgent(name="top", model=top_model, sub_agents=[mid])
    assert leaf.canonical_model is mid_model

    skipped = LlmAgent(name="skipped")
    LlmAgent(
        name="root", model=top_model, sub_agents=[SequentialAgent(name="s", sub_agents=[skipped])]
    )
    assert skipped.canonical_model is top_model


async def test_inherited_model_answers_for_the_sub_agent_r_llm_9() -> None:
    model = ScriptedModel([fc("transfer_to_agent", {"agent_name": "child"}), "from child"])
    child = LlmAgent(name="child")
    root = LlmAgent(name="root", model=model, sub_agents=[child])
    events = await chat(root)
    assert (events[-1].author, events[-1].text) == ("child", "from child")
    assert [r.labels["adk_agent_name"] for r in model.requests] == ["root", "child"]


async def test_a_model_name_resolves_through_the_registry_once_per_agent_r_llm_9() -> None:
    made: list[ScriptedModel] = []

    def factory(name: str) -> ScriptedModel:
        made.append(ScriptedModel(["one", "two"], model=name))
        return made[-1]

    register_model(r"test-llm-agent/.*", factory)
    agent = LlmAgent(name="a", model="test-llm-agent/small")
    session = await Chat.start(agent)
    await session.send()
    await session.send()
    assert len(made) == 1
    assert [r.model for r in made[0].requests] == ["test-llm-agent/small"] * 2


def test_an_unregistered_model_name_is_a_configuration_error_r_llm_9() -> None:
    with pytest.raises(ConfigurationError, match="no-such-model-xyz"):
        _ = LlmAgent(name="a", model="no-such-model-xyz").canonical_model


async def test_default_model_is_the_last_resort_r_llm_9(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ScriptedModel(["from default"])
    monkeypatch.setattr(LlmAgent, "default_model", model)
    events = await chat(LlmAgent(name="a"))
    assert kinds(events) == ["T:from default"]


async def test_no_model_anywhere_fails_the_run_r_llm_9() -> None:
    session = await Chat.start(LlmAgent(name="lost"))
    with pytest.raises(ConfigurationError, match="'lost' has no model"):
        await session.send()
    stored = await session.stored()
    assert [(e.author, e.error_code) for e in stored] == [("lost", "ConfigurationError")]


# -- the call budget (R-RUN-10) ------------------------------------------------------------------


def _always_call(request: LlmRequest) -> LlmResponse:
    return fc("lookup", {"q": str(len(request.contents))})


async def test_max_llm_calls_raises_before_the_call_that_would_exceed_it_r_run_10() -> None:
    model = ScriptedModel(_always_call)
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[lookup]))
    with pytest.raises(LlmCallLimitError, match="max_llm_calls=3"):
        await session.send(run_config=RunConfig(max_llm_calls=3))
    assert len(model.requests) == 3
    assert kinds(session.delivered) == [*["FC:lookup", "FR:lookup"] * 3, "E:LlmCallLimitError"]
    assert session.delivered == await session.stored()


async def test_the_call_budget_is_shared_by_the_agents_of_an_invocation_r_run_10() -> None:
    first = ScriptedModel([fc("lookup", {"q": "a"}), "first done"])
    second = ScriptedModel(["second"])
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="a1", model=first, tools=[lookup]),
            LlmAgent(name="a2", model=second),
        ],
    )
    session = await Chat.start(seq)
    with pytest.raises(LlmCallLimitError, match="'a2'"):
        await session.send(run_config=RunConfig(max_llm_calls=2))
    assert len(first.requests) == 2
    assert second.requests == []


async def test_each_invocation_has_a_fresh_call_budget_r_run_10() -> None:
    model = ScriptedModel(["one", "two", "three"])
    session = await Chat.start(LlmAgent(name="a", model=model))
    for _ in range(3):
        await session.send(run_config=RunConfig(max_llm_calls=1))
    assert len(model.requests) == 3


async def test_non_positive_max_llm_calls_means_unlimited_r_cfg_2() -> None:
    script: list[Any] = [fc("lookup", {"q": str(i)}) for i in range(5)] + ["done"]
    model = ScriptedModel(script)
    events = await chat(
        LlmAgent(name="a", model=model, tools=[lookup]), run_config=RunConfig(max_llm_calls=0)
    )
    assert events[-1].text == "done"
    assert len(model.requests) == 6


async def test_calls_answered_by_before_model_callback_do_not_count_r_run_10() -> None:
    def cached_first(*, callback_context: Any, llm_request: LlmRequest) -> LlmResponse | None:
        if len(llm_request.contents) == 1:
            return fc("lookup", {"q": "cached"})
        return None

    model = ScriptedModel(["real"])
    agent = LlmAgent(name="a", model=model, tools=[lookup], before_model_callback=cached_first)
    events = await chat(agent, run_config=RunConfig(max_llm_calls=1))
    assert kinds(events) == ["FC:lookup", "FR:lookup", "T:real"]
    assert len(model.requests) == 1


async def test_model_errors_propagate_with_their_type_s_cb_10() -> None:
    model = ScriptedModel([ConnectionError("network down")])
    session = await Chat.start(LlmAgent(name="a", model=model))
    with pytest.raises(ConnectionError, match="network down"):
        await session.send()
    stored = await session.stored()
    assert [(e.error_code, e.error_message) for e in stored] == [
        ("ConnectionError", "network down")
    ]


async def test_text_and_function_call_in_one_response_is_not_final_r_fin_3() -> None:
    model = ScriptedModel([calls(call("lookup", {"q": "a"}), text="Let me check. "), "Answer."])
    events = await chat(LlmAgent(name="a", model=model, tools=[lookup]))
    assert events[0].text == "Let me check. "
    assert not events[0].is_final_response()
    assert kinds(events)[1:] == ["FR:lookup", "T:Answer."]


async def test_the_user_message_may_be_content_with_several_parts_r_llm_8() -> None:
    model = ScriptedModel(["ok"])
    message = Content(role="user", parts=[Part.from_text("a"), Part.from_text("b")])
    await chat(LlmAgent(name="a", model=model), message)
    assert model.requests[0].contents == [message]


# -- the scripted model itself -------------------------------------------------------------------


async def test_scripted_model_async_handler_sees_each_request() -> None:
    async def handler(request: LlmRequest) -> LlmResponse | str:
        if len(request.contents) == 1:
            return fc("lookup", {"q": "h"})
        answer = request.contents[-1].parts[0].function_response
        assert answer is not None
        return f"got {answer.response['result']}"

    model = ScriptedModel(handler)
    events = await chat(LlmAgent(name="a", model=model, tools=[lookup]))
    assert kinds(events) == ["FC:lookup", "FR:lookup", "T:got found h"]
    assert len(model.requests) == 2


async def test_an_exhausted_script_is_a_model_error() -> None:
    model = ScriptedModel([fc("lookup", {"q": "a"})], model="short")
    with pytest.raises(ModelError, match="'short' has 1 entries but was called 2 times"):
        await chat(LlmAgent(name="a", model=model, tools=[lookup]))
