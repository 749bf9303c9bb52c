"""``output_key`` and ``output_schema`` (R-OUT common core, ARCHITECTURE §4; S-OUT-*).

trio_agents writes the key from the agent's *own* final text response, non-thought text only,
without 2.13's cross-step accumulation.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import attrs
import pydantic
import pytest

from tests.agents.llm_helpers import Chat, call, calls, chat, fc, kinds, model_text
from trio_agents import Content, LlmAgent, SerializationError
from trio_agents.agents._output import validate_output
from trio_agents.testing import ScriptedModel


@attrs.define
class Verdict:
    score: int
    reason: str = ""


@dataclasses.dataclass
class Pair:
    left: str
    right: int | None = None


def lookup(q: str) -> str:
    return f"found {q}"


# -- output_key ----------------------------------------------------------------------------------


async def test_output_key_saves_the_final_text_r_out() -> None:
    session = await Chat.start(
        LlmAgent(name="a", model=ScriptedModel([model_text("Hello ", "world")]), output_key="out")
    )
    (event,) = await session.send()
    assert dict(event.actions.state_delta) == {"out": "Hello world"}
    assert (await session.session()).state == {"out": "Hello world"}


async def test_output_key_ignores_the_text_next_to_a_function_call_s_out_1() -> None:
    model = ScriptedModel([calls(call("lookup", {"q": "a"}), text="Let me check. "), "Answer."])
    session = await Chat.start(LlmAgent(name="a", model=model, tools=[lookup], output_key="out"))
    events = await session.send()
    assert [dict(e.actions.state_delta) for e in events] == [{}, {}, {"out": "Answer."}]
    assert (await session.session()).state == {"out": "Answer."}


async def test_output_key_skips_thought_parts_s_out_2() -> None:
    model = ScriptedModel([model_text("visible", thought=("pondering",))])
    session = await Chat.start(LlmAgent(name="a", model=model, output_key="out"))
    await session.send()
    assert (await session.session()).state == {"out": "visible"}


async def test_output_key_is_only_written_from_the_agents_own_events_s_out_3() -> None:
    helper = LlmAgent(name="b", model=ScriptedModel(["from b"]), output_key="b_out")
    coordinator = LlmAgent(
        name="coord",
        model=ScriptedModel([fc("transfer_to_agent", {"agent_name": "b"})]),
        output_key="coord_out",
        sub_agents=[helper],
    )
    session = await Chat.start(coordinator)
    events = await session.send()
    assert (events[-1].author, events[-1].text) == ("b", "from b")
    assert (await session.session()).state == {"b_out": "from b"}


async def test_output_key_is_updated_each_turn_r_out() -> None:
    session = await Chat.start(
        LlmAgent(name="a", model=ScriptedModel(["one", "two"]), output_key="out")
    )
    await session.send()
    await session.send()
    assert (await session.session()).state == {"out": "two"}


async def test_output_key_is_not_written_from_an_error_response_r_out() -> None:
    session = await Chat.start(
        LlmAgent(name="a", model=ScriptedModel([model_text(thought=("only",))]), output_key="out")
    )
    (event,) = await session.send()
    assert event.error_code == "MODEL_RETURNED_NO_CONTENT"
    assert (await session.session()).state == {}


async def test_a_before_agent_answer_sets_the_output_key_an_after_agent_answer_does_not() -> None:
    # ADK 2.13's LlmAgent saves its output from the event of a before-agent callback's answer
    # (with the callback's own state writes), not from an after-agent callback's answer.
    def before(callback_context: Any) -> Content:
        callback_context.state["seen"] = True
        return Content.from_text("cached answer", role="model")

    model = ScriptedModel(["never"])
    session = await Chat.start(
        LlmAgent(name="a", model=model, output_key="out", before_agent_callback=before)
    )
    (event,) = await session.send()
    assert dict(event.actions.state_delta) == {"seen": True, "out": "cached answer"}
    assert (await session.session()).state == {"seen": True, "out": "cached answer"}
    assert model.requests == []

    def after(callback_context: Any) -> Content:
        return Content.from_text("footnote", role="model")

    agent = LlmAgent(
        name="a", model=ScriptedModel(["Hello"]), output_key="out", after_agent_callback=after
    )
    answer, footnote = await chat(agent)
    assert dict(answer.actions.state_delta) == {"out": "Hello"}
    assert footnote.text == "footnote"
    assert dict(footnote.actions.state_delta) == {}


async def test_a_temp_output_key_is_visible_later_in_the_invocation_only_r_st_4() -> None:
    from trio_agents import SequentialAgent

    reader = ScriptedModel(["ok"])
    seq = SequentialAgent(
        name="seq",
        sub_agents=[
            LlmAgent(name="w", model=ScriptedModel(["secret"]), output_key="temp:out"),
            LlmAgent(name="r", model=reader, instruction="saw {temp:out}"),
        ],
    )
    session = await Chat.start(seq)
    events = await session.send()
    assert (reader.requests[0].system_instruction or "").startswith("saw secret\n\n")
    assert dict(events[0].actions.state_delta) == {}
    assert (await session.session()).state == {}


# -- output_schema -------------------------------------------------------------------------------


async def test_output_schema_sets_the_response_schema_and_parses_the_answer_r_out() -> None:
    model = ScriptedModel([json.dumps({"score": 5})])
    session = await Chat.start(
        LlmAgent(name="a", model=model, output_schema=Verdict, output_key="verdict")
    )
    (event,) = await session.send()
    assert model.requests[0].response_schema == {
        "type": "object",
        "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}},
        "required": ["score"],
    }
    assert event.error_code is None
    assert (await session.session()).state == {"verdict": {"score": 5, "reason": ""}}


async def test_output_schema_from_a_dataclass_r_out() -> None:
    model = ScriptedModel(['{"left": "x"}'])
    session = await Chat.start(LlmAgent(name="a", model=model, output_schema=Pair, output_key="p"))
    await session.send()
    schema = model.requests[0].response_schema
    assert schema is not None
    assert schema["required"] == ["left"]
    assert (await session.session()).state == {"p": {"left": "x", "right": None}}


class Invoice(pydantic.BaseModel):
    total: int
    memo: str | None = None


async def test_output_schema_from_a_pydantic_model() -> None:
    # ADK 2.13 sends the model's schema and stores the validated answer as
    # model_dump(exclude_none=True): {"total": 3}, the None field left out.
    model = ScriptedModel(['{"total": 3, "memo": null}'])
    agent = LlmAgent(name="a", model=model, output_schema=Invoice, output_key="inv")
    session = await Chat.start(agent)
    (event,) = await session.send()
    assert model.requests[0].response_schema == Invoice.model_json_schema()
    assert event.error_code is None
    assert dict(event.actions.state_delta) == {"inv": {"total": 3}}
    assert (await session.session()).state == {"inv": {"total": 3}}


@pytest.mark.parametrize(
    "answer",
    ['```json\n{"score": 2}\n```', '  ```\n{"score": 2}```  ', '```JSON {"score": 2}\n```'],
    ids=["json-fence", "bare-fence", "same-line"],
)
async def test_a_json_answer_in_a_code_fence_is_accepted(answer: str) -> None:
    # ADK 2.13 strips a Markdown fence wrapping the whole answer before parsing it.
    model = ScriptedModel([answer])
    session = await Chat.start(
        LlmAgent(name="a", model=model, output_schema=Verdict, output_key="v")
    )
    (event,) = await session.send()
    assert event.error_code is None
    assert event.text == answer  # the event keeps the answer as the model gave it
    assert (await session.session()).state == {"v": {"score": 2, "reason": ""}}


async def test_output_schema_as_a_json_schema_dict_r_out() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    model = ScriptedModel(["[1, 2, 3]"])
    session = await Chat.start(
        LlmAgent(name="a", model=model, output_schema=schema, output_key="o")
    )
    await session.send()
    assert model.requests[0].response_schema == schema
    assert (await session.session()).state == {"o": [1, 2, 3]}


@pytest.mark.parametrize(
    ("schema", "answer", "detail"),
    [
        (Verdict, "not json", "does not match output_schema"),
        (Verdict, '{"reason": "no score"}', "score"),
        (Verdict, '{"score": 1, "extra": 2}', "extra"),
        ({"type": "object", "required": ["v"]}, '{"w": 1}', "'v'"),
        ({"type": "object", "properties": {"v": {"type": "integer"}}}, '{"v": "x"}', "$.v"),
        ({"type": "string", "enum": ["yes", "no"]}, '"maybe"', "maybe"),
        (Verdict, "[1, 2]", "expected object, got list"),
        (Pair, '"left"', "expected object, got str"),
        (Verdict, '{"score": "high"}', "$.score"),
        (Invoice, '{"total": "many"}', "$.total"),
    ],
    ids=[
        "not-json",
        "missing",
        "extra-key",
        "dict-required",
        "dict-type",
        "dict-enum",
        "class-not-an-object",
        "dataclass-not-an-object",
        "class-field-type",
        "pydantic-field-type",
    ],
)
async def test_an_answer_not_matching_the_schema_is_an_error_event_s_out(
    schema: Any, answer: str, detail: str
) -> None:
    model = ScriptedModel([answer, "never"])
    session = await Chat.start(
        LlmAgent(name="a", model=model, output_schema=schema, output_key="o")
    )
    (event,) = await session.send()
    assert event.error_code == "INVALID_OUTPUT_SCHEMA"
    assert event.error_message is not None
    assert "'a'" in event.error_message
    assert detail in event.error_message
    assert event.text == answer  # the answer itself is kept for inspection
    assert event.is_final_response()
    assert len(model.requests) == 1
    stored = await session.session()
    assert "o" not in stored.state
    assert [e.error_code for e in stored.events[1:]] == ["INVALID_OUTPUT_SCHEMA"]


async def test_a_bug_in_validation_propagates_instead_of_becoming_an_error_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug in the validator")

    monkeypatch.setattr("trio_agents.agents._output.validate_output", broken)
    model = ScriptedModel(['{"score": 1}'])
    with pytest.raises(TypeError, match="a bug in the validator"):
        await chat(LlmAgent(name="a", model=model, output_schema=Verdict))


async def test_output_schema_is_validated_without_output_key_r_out() -> None:
    model = ScriptedModel(["oops"])
    (event,) = await chat(LlmAgent(name="a", model=model, output_schema=Verdict))
    assert event.error_code == "INVALID_OUTPUT_SCHEMA"


async def test_with_tools_the_schema_is_not_sent_but_the_answer_is_checked_r_llm_3() -> None:
    model = ScriptedModel([fc("lookup", {"q": "a"}), '{"score": 7}'])
    session = await Chat.start(
        LlmAgent(name="a", model=model, tools=[lookup], output_schema=Verdict, output_key="v")
    )
    events = await session.send()
    assert kinds(events) == ["FC:lookup", "FR:lookup", 'T:{"score": 7}']
    assert [r.response_schema for r in model.requests] == [None, None]
    assert (await session.session()).state == {"v": {"score": 7, "reason": ""}}


async def test_with_tools_the_answer_is_given_through_set_model_response() -> None:
    # ADK 2.13, for an agent with tools and an output_schema: a set_model_response tool whose
    # parameters are the schema, an instruction to answer through it; an invalid call is
    # answered with the error, a valid one ends the turn with a model event holding the answer
    # as JSON text (the output key set from it).
    model = ScriptedModel(
        [
            fc("lookup", {"q": "a"}),
            fc("set_model_response", {"score": "high"}),
            fc("set_model_response", {"score": 7}),
            "never",
        ]
    )
    session = await Chat.start(
        LlmAgent(name="a", model=model, tools=[lookup], output_schema=Verdict, output_key="v")
    )
    events = await session.send()
    assert kinds(events) == [
        "FC:lookup",
        "FR:lookup",
        "FC:set_model_response",
        "FR:set_model_response",
        "FC:set_model_response",
        "FR:set_model_response",
        'T:{"score": 7, "reason": ""}',
    ]
    first = model.requests[0]
    assert [d.name for d in first.tools] == ["lookup", "set_model_response"]
    assert first.tools[1].parameters == {
        "type": "object",
        "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}},
        "required": ["score"],
    }
    assert first.system_instruction is not None
    assert "`set_model_response`" in first.system_instruction
    (refused,) = events[3].get_function_responses()
    assert "$.score" in refused.response["error"]
    final = events[-1]
    assert final.is_final_response()
    assert (final.author, final.content and final.content.role) == ("a", "model")
    assert dict(final.actions.state_delta) == {"v": {"score": 7, "reason": ""}}
    assert len(model.requests) == 3
    assert (await session.stored())[-1] == final


@pytest.mark.parametrize(
    ("schema", "data", "path"),
    [
        ({"type": "object", "properties": {"v": {"type": "integer"}}}, {"v": "x"}, "$.v"),
        ({"type": "array", "items": {"type": "string"}}, ["a", 2], "$[1]"),
        ({"type": "object", "required": ["v"]}, {}, "$"),
        (Verdict, {"score": "high"}, "$.score"),
        (Verdict, [], "$"),
        (int, "seven", "$"),
    ],
    ids=["property", "item", "required", "class-field", "class-root", "scalar"],
)
def test_a_mismatch_is_a_serialization_error_naming_the_path(
    schema: Any, data: Any, path: str
) -> None:
    with pytest.raises(SerializationError, match=r"^agent 'a': ") as info:
        validate_output(schema, data, where="agent 'a'")
    assert info.value.path == path
    assert isinstance(info.value, ValueError)  # ``except ValueError`` still catches it
