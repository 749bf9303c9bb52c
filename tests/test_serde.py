"""The JSON layer: ``Event.to_json`` / ``Event.from_json``, ``structure`` / ``unstructure``,
``check_json_value`` and :class:`SerializationError` (ADK-SEMANTICS R-EV-8).

The ADK fixtures below were written by google-adk 2.13.0 (google-genai 2.34.0, pydantic 2.14.3)
in a throwaway virtualenv; this test does not import google-adk, and the project does not depend
on it. They come from real ``Runner.run_async`` runs of ``LlmAgent`` / ``LoopAgent`` trees over a
scripted ``BaseLlm`` (an ``InMemorySessionService``; the two partial/streaming events come from
``RunConfig(streaming_mode=SSE)``), serialised as ADK's web API serialises events (``/run``,
``/run_sse``, ``GET .../sessions/{id}``)::

    _redact_credential_secrets(public_event(event).model_dump(
        exclude_none=True, by_alias=True, mode="json"))

which is, for these events, the same JSON object as
``event.model_dump_json(by_alias=True, exclude_none=True)`` (checked for each). ADK's
``SqliteSessionService`` stores ``event.model_dump_json(exclude_none=True)`` instead: snake_case
keys; three events are also kept in that form (``ADK_SQLITE_EVENTS``).

What the interop check found:

* ADK writes bytes (``inlineData.data``, ``thoughtSignature``) as **URL-safe** base64 with padding
  (pydantic's ``ser_json_bytes="base64"``); it reads both alphabets, padded or not. trio_agents
  wrote the standard alphabet; it now writes the URL-safe one.
* ADK always writes ``actions.stateDelta`` / ``artifactDelta`` / ``requestedAuthConfigs`` (empty
  or not), ``invocationId`` and ``author``, and ``longRunningToolIds: []`` on every model
  function-call event; trio_agents writes the same (an empty set stays ``[]``).
* Fields trio_agents does not model, dropped on input (R-EV-8: unknown fields are ignored) and so
  missing from its output; :func:`modelled` strips exactly these before comparing:

  - ``nodeInfo`` (2.13 workflow node path, always written, ``{"path": ""}`` by default) and
    ``actions.requestedToolConfirmations`` (always written, ``{}`` by default): both have
    defaults ADK fills back in when it reads trio_agents' JSON;
  - ``modelVersion`` and, in ``usageMetadata``, ``promptTokensDetails`` / ``trafficType``
    (Gemini response metadata; only the token counts are modelled).
* Where ADK has ``None`` and trio_agents an empty default, trio_agents writes the empty value:
  a ``functionCall`` without ``args`` is re-dumped with ``"args": {}`` (likewise
  ``functionResponse.response``, ``content.parts`` and ``inlineData.data``). None of the fixtures
  has such a field; :func:`test_missing_payloads_come_back_empty` pins the behaviour.

Reverse direction, checked offline (not by this test, which cannot import ADK): the 13 fixtures
as re-dumped by trio_agents, ``FULL_EVENT`` and 2,000 events drawn from :data:`events` below were
written by trio_agents and read by ADK 2.13 with ``Event.model_validate_json``. All validated, and
ADK's re-dump (``model_dump(exclude_none=True, by_alias=True, mode="json")``) equalled trio_agents'
JSON once ADK's defaults ``nodeInfo: {"path": ""}`` and ``actions.requestedToolConfirmations: {}``
were removed, with one difference: ADK replaces an empty ``id`` (``""``) with a fresh uuid
(R-EV-1), where trio_agents keeps ``""``. (ADK also derives a ``credentialKey`` for a requested
auth config that has none, so the auth configs here carry one.)
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import random
from typing import Any

import pytest
from hypothesis import given, strategies as st

from trio_agents import (
    Blob,
    CodeExecutionResult,
    ConfigurationError,
    Content,
    Event,
    EventActions,
    ExecutableCode,
    FileData,
    FunctionCall,
    FunctionResponse,
    Part,
    SerializationError,
    ToolConfirmation,
    TrioAgentsError,
    UsageMetadata,
)
from trio_agents._serde import (
    check_json_value,
    dumps,
    is_json_value,
    loads,
    structure,
    unstructure,
)
from trio_agents.testing.strategies import json_values as shipped_json_values

# -- strategies ----------------------------------------------------------------------------------

json_values = shipped_json_values(max_leaves=12)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=4)


def opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


# Enum-valued fields use Gemini's names, so that the drawn events also validate in ADK.
finish_reasons = st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER"])
languages = st.sampled_from(["PYTHON", "LANGUAGE_UNSPECIFIED"])
outcomes = st.sampled_from(["OUTCOME_OK", "OUTCOME_FAILED", "OUTCOME_DEADLINE_EXCEEDED"])
auth_configs = st.builds(
    lambda name, key: {
        "authScheme": {"type": "apiKey", "in": "header", "name": name},
        "credentialKey": key,
    },
    st.text(min_size=1, max_size=10),
    st.text(min_size=1, max_size=10),
)

parts = st.builds(
    Part,
    text=opt(st.text(max_size=20)),
    thought=opt(st.booleans()),
    thought_signature=opt(st.binary(max_size=12)),
    function_call=opt(
        st.builds(
            FunctionCall,
            name=st.text(min_size=1, max_size=10),
            args=json_objects,
            id=opt(st.text()),
        )
    ),
    function_response=opt(
        st.builds(
            FunctionResponse,
            name=st.text(min_size=1, max_size=10),
            response=json_objects,
            id=opt(st.text()),
        )
    ),
    inline_data=opt(
        st.builds(
            Blob,
            mime_type=opt(st.sampled_from(["image/png", "audio/wav", "application/pdf"])),
            data=st.binary(max_size=24),
            display_name=opt(st.text(max_size=10)),
        )
    ),
    file_data=opt(
        st.builds(
            FileData,
            file_uri=st.text(max_size=20),
            mime_type=opt(st.text(max_size=10)),
            display_name=opt(st.text(max_size=10)),
        )
    ),
    executable_code=opt(
        st.builds(ExecutableCode, code=st.text(max_size=20), language=opt(languages))
    ),
    code_execution_result=opt(
        st.builds(CodeExecutionResult, outcome=opt(outcomes), output=opt(st.text(max_size=20)))
    ),
)
contents = st.builds(
    Content,
    role=opt(st.sampled_from(["user", "model"]) | st.text(max_size=6)),
    parts=st.lists(parts, max_size=3),
)
actions = st.builds(
    EventActions,
    state_delta=json_objects,
    artifact_delta=st.dictionaries(st.text(max_size=10), st.integers(0, 2**31), max_size=3),
    transfer_to_agent=opt(st.text(max_size=10)),
    escalate=opt(st.booleans()),
    skip_summarization=opt(st.booleans()),
    requested_auth_configs=st.dictionaries(st.text(max_size=10), auth_configs, max_size=2),
    requested_tool_confirmations=st.dictionaries(
        st.text(max_size=10),
        st.builds(
            ToolConfirmation,
            hint=st.text(max_size=10),
            confirmed=st.booleans(),
            payload=json_values,
        ),
        max_size=2,
    ),
    end_of_agent=opt(st.booleans()),
    agent_state=opt(json_objects),
)
counts = opt(st.integers(0, 2**31))
usages = st.builds(
    UsageMetadata,
    prompt_token_count=counts,
    candidates_token_count=counts,
    total_token_count=counts,
    cached_content_token_count=counts,
    thoughts_token_count=counts,
    tool_use_prompt_token_count=counts,
)
events = st.builds(
    Event,
    id=st.uuids().map(str) | st.text(max_size=10),
    invocation_id=st.text(max_size=10),
    author=st.sampled_from(["user", "root", "helper"]) | st.text(max_size=10),
    branch=opt(st.text(max_size=12)),
    timestamp=st.floats(allow_nan=False, allow_infinity=False),
    content=opt(contents),
    partial=opt(st.booleans()),
    turn_complete=opt(st.booleans()),
    finish_reason=opt(finish_reasons),
    error_code=opt(st.text(max_size=10)),
    error_message=opt(st.text(max_size=20)),
    interrupted=opt(st.booleans()),
    custom_metadata=opt(json_objects),
    usage_metadata=opt(usages),
    long_running_tool_ids=opt(st.frozensets(st.text(max_size=10), max_size=3)),
    actions=actions,
)

# The camelCase names of the record-level keys whose values are payloads (passed verbatim: their
# own keys are user data and are never renamed).
PAYLOAD_KEYS = {
    "stateDelta",
    "artifactDelta",
    "requestedAuthConfigs",
    "requestedToolConfirmations",
    "agentState",
    "customMetadata",
    "args",
    "response",
}


def snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def rewrite_records(data: Any, rename: Any, extra: dict[str, Any] | None = None) -> Any:
    """``data`` (an event's JSON object) with ``rename`` applied to every record-level key and
    ``extra`` added to every record object; payloads are copied unchanged."""
    if isinstance(data, list):
        return [rewrite_records(item, rename, extra) for item in data]
    if not isinstance(data, dict):
        return data
    out = {
        rename(key): value if key in PAYLOAD_KEYS else rewrite_records(value, rename, extra)
        for key, value in data.items()
    }
    return {**out, **(extra or {})}


# -- round trip (property) -----------------------------------------------------------------------


@given(events)
def test_every_event_round_trips_through_json(event: Event) -> None:
    """R-EV-8: ``from_json(to_json(e)) == e``, and the text is a fixed point after one trip."""
    text = event.to_json()
    again = Event.from_json(text)
    assert again == event
    assert again.to_json() == text
    assert json.loads(text) == event.to_dict()
    assert Event.from_dict(event.to_dict()) == event


@given(events, st.randoms(use_true_random=False))
def test_snake_case_and_mixed_keys_read_the_same(event: Event, rng: random.Random) -> None:
    """R-EV-8: snake_case is accepted on input, key by key (payload keys stay as they are)."""
    camel = event.to_dict()
    assert Event.from_dict(rewrite_records(camel, snake)) == event
    mixed = rewrite_records(camel, lambda key: snake(key) if rng.random() < 0.5 else key)
    assert Event.from_dict(mixed) == event


@given(events, json_values)
def test_unknown_fields_are_ignored_at_every_level(event: Event, junk: Any) -> None:
    """R-EV-8 [2.13]: unknown fields are ignored, at the top and in every nested record."""
    noisy = rewrite_records(event.to_dict(), lambda key: key, {"zzFutureField": junk})
    assert "zzFutureField" in noisy["actions"]
    assert Event.from_dict(noisy) == event


@given(contents)
def test_records_round_trip_through_structure(content: Content) -> None:
    data = unstructure(content)
    assert structure(json.loads(dumps(data)), Content) == content
    for part in content.parts:
        assert structure(unstructure(part), Part) == part


@given(json_values | st.lists(st.integers()))  # integers beyond 2**53 too
def test_check_json_value_accepts_every_json_value(value: Any) -> None:
    check_json_value(value, "v")
    assert loads(dumps(value)) == value


# -- key policy ----------------------------------------------------------------------------------

SIGNATURE = b"\xfb\xff\xbf"  # standard base64 "+/+/", URL-safe "-_-_"

FULL_EVENT = Event(
    id="ev-1",
    invocation_id="e-1",
    author="root",
    branch="root.helper",
    timestamp=1700000000.25,
    content=Content(
        role="model",
        parts=(
            Part(text="thinking", thought=True, thought_signature=SIGNATURE),
            Part(function_call=FunctionCall(name="get", args={"agent_name": "x"}, id="c1")),
            Part(function_response=FunctionResponse(name="get", response={"ok_value": 1}, id="c1")),
            Part(inline_data=Blob(mime_type="image/png", data=b"\xfb\xff", display_name="p.png")),
            Part(file_data=FileData(file_uri="gs://b/f", mime_type="text/plain", display_name="f")),
            Part(executable_code=ExecutableCode(code="print(1)", language="PYTHON")),
            Part(code_execution_result=CodeExecutionResult(outcome="OUTCOME_OK", output="1")),
        ),
    ),
    partial=False,
    turn_complete=True,
    finish_reason="STOP",
    error_code="E1",
    error_message="boom",
    interrupted=False,
    custom_metadata={"trace_id": "t"},
    usage_metadata=UsageMetadata(
        prompt_token_count=1,
        candidates_token_count=2,
        total_token_count=3,
        cached_content_token_count=4,
        thoughts_token_count=5,
        tool_use_prompt_token_count=6,
    ),
    long_running_tool_ids={"c2", "c1"},
    actions=EventActions(
        state_delta={"user:snake_key": {"inner_key": [1, None]}, "camelKey": 2},
        artifact_delta={"report.txt": 3},
        transfer_to_agent="helper",
        escalate=True,
        skip_summarization=True,
        requested_auth_configs={
            "c1": {"authScheme": {"type": "http", "scheme": "bearer"}, "credentialKey": "k1"}
        },
    ),
)

FULL_EVENT_JSON = {
    "id": "ev-1",
    "invocationId": "e-1",
    "author": "root",
    "branch": "root.helper",
    "timestamp": 1700000000.25,
    "content": {
        "role": "model",
        "parts": [
            {"text": "thinking", "thought": True, "thoughtSignature": "-_-_"},
            {"functionCall": {"name": "get", "args": {"agent_name": "x"}, "id": "c1"}},
            {"functionResponse": {"name": "get", "response": {"ok_value": 1}, "id": "c1"}},
            {"inlineData": {"mimeType": "image/png", "data": "-_8=", "displayName": "p.png"}},
            {"fileData": {"fileUri": "gs://b/f", "mimeType": "text/plain", "displayName": "f"}},
            {"executableCode": {"code": "print(1)", "language": "PYTHON"}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
        ],
    },
    "partial": False,
    "turnComplete": True,
    "finishReason": "STOP",
    "errorCode": "E1",
    "errorMessage": "boom",
    "interrupted": False,
    "customMetadata": {"trace_id": "t"},
    "usageMetadata": {
        "promptTokenCount": 1,
        "candidatesTokenCount": 2,
        "totalTokenCount": 3,
        "cachedContentTokenCount": 4,
        "thoughtsTokenCount": 5,
        "toolUsePromptTokenCount": 6,
    },
    "longRunningToolIds": ["c1", "c2"],
    "actions": {
        "stateDelta": {"user:snake_key": {"inner_key": [1, None]}, "camelKey": 2},
        "artifactDelta": {"report.txt": 3},
        "transferToAgent": "helper",
        "escalate": True,
        "skipSummarization": True,
        "requestedAuthConfigs": {
            "c1": {"authScheme": {"type": "http", "scheme": "bearer"}, "credentialKey": "k1"}
        },
    },
}

# The JSON keys (aliases) of the same records in ADK 2.13 / google-genai 2.34, read from
# ``Model.model_fields`` in the throwaway ADK virtualenv.
ADK_KEYS = {
    "Event": "modelVersion content groundingMetadata partial turnComplete turnCompleteReason "
    "interactionStatus finishReason errorCode errorMessage interrupted customMetadata "
    "usageMetadata liveSessionResumptionUpdate liveSessionId goAway voiceActivity "
    "inputTranscription outputTranscription avgLogprobs logprobsResult cacheMetadata "
    "citationMetadata interactionId environmentId invocationId author actions output nodeInfo "
    "longRunningToolIds branch isolationScope id timestamp",
    "EventActions": "skipSummarization stateDelta artifactDelta transferToAgent transferReason "
    "escalate requestedAuthConfigs requestedToolConfirmations compaction endOfAgent agentState "
    "rewindBeforeInvocationId route renderUiWidgets setModelResponse",
    "UsageMetadata": "cacheTokensDetails cachedContentTokenCount candidatesTokenCount "
    "candidatesTokensDetails promptTokenCount promptTokensDetails thoughtsTokenCount "
    "toolUsePromptTokenCount toolUsePromptTokensDetails totalTokenCount trafficType",
    "Content": "parts role",
    "Part": "mediaResolution codeExecutionResult executableCode fileData functionCall "
    "functionResponse inlineData text thought thoughtSignature videoMetadata toolCall "
    "toolResponse partMetadata audioTranscription mediaProcessing speechMetadata",
    "FunctionCall": "id args name partialArgs willContinue",
    "FunctionResponse": "willContinue scheduling parts id name response",
    "Blob": "data displayName mimeType",
    "FileData": "displayName fileUri mimeType",
    "ExecutableCode": "code language id",
    "CodeExecutionResult": "outcome output id",
}


def test_full_event_is_written_with_camel_case_keys() -> None:
    """R-EV-8: camelCase record keys, payload keys verbatim, ids sorted, bytes URL-safe base64."""
    assert FULL_EVENT.to_dict() == FULL_EVENT_JSON
    assert json.loads(FULL_EVENT.to_json()) == FULL_EVENT_JSON
    assert Event.from_json(FULL_EVENT.to_json()) == FULL_EVENT


def test_every_key_written_is_the_adk_key_of_that_record() -> None:
    """Each record's keys are among ADK 2.13's aliases for the same model."""
    content = FULL_EVENT.content
    assert content is not None
    p = content.parts
    records: dict[str, list[Any]] = {
        "Event": [FULL_EVENT],
        "EventActions": [FULL_EVENT.actions],
        "UsageMetadata": [FULL_EVENT.usage_metadata],
        "Content": [content],
        "Part": list(p),
        "FunctionCall": [p[1].function_call],
        "FunctionResponse": [p[2].function_response],
        "Blob": [p[3].inline_data],
        "FileData": [p[4].file_data],
        "ExecutableCode": [p[5].executable_code],
        "CodeExecutionResult": [p[6].code_execution_result],
    }
    assert records.keys() == ADK_KEYS.keys()
    for name, items in records.items():
        written = set().union(*(unstructure(item) for item in items))
        assert written <= set(ADK_KEYS[name].split()), name


def test_none_is_omitted_and_empty_dicts_are_kept() -> None:
    """R-EV-8: the API writes with ``exclude_none=True``; ADK writes empty action dicts too."""
    event = Event(id="e", timestamp=1.5)
    assert event.to_dict() == {
        "id": "e",
        "invocationId": "",
        "author": "",
        "timestamp": 1.5,
        "actions": {"stateDelta": {}, "artifactDelta": {}, "requestedAuthConfigs": {}},
    }
    assert unstructure(Part(text="t")) == {"text": "t"}
    assert unstructure(Content()) == {"parts": []}
    none_in_payload = Event(id="e", timestamp=1.5, actions=EventActions(state_delta={"k": None}))
    assert none_in_payload.to_dict()["actions"]["stateDelta"] == {"k": None}
    assert Event.from_json(none_in_payload.to_json()) == none_in_payload


def test_missing_payloads_come_back_empty() -> None:
    """ADK's ``None`` (field absent) for args, response, parts and data is written back empty."""
    data = {
        "id": "e",
        "timestamp": 1.0,
        "content": {
            "parts": [
                {"functionCall": {"name": "f"}},
                {"functionResponse": {"name": "f"}},
                {"inlineData": {"mimeType": "image/png"}},
            ]
        },
    }
    assert Event.from_dict(data).to_dict()["content"] == {
        "parts": [
            {"functionCall": {"name": "f", "args": {}}},
            {"functionResponse": {"name": "f", "response": {}}},
            {"inlineData": {"mimeType": "image/png", "data": ""}},
        ]
    }
    assert Event.from_dict({"content": {"role": "user"}}).to_dict()["content"] == {
        "role": "user",
        "parts": [],
    }


def test_explicit_nulls_on_input_mean_absent() -> None:
    data = {"id": "e", "timestamp": 2.0, "branch": None, "content": None, "partial": None}
    assert Event.from_dict(data) == Event(id="e", timestamp=2.0)


def test_snake_case_event_reads_like_the_camel_case_one() -> None:
    """R-EV-8: snake_case is accepted on input; payload keys are never renamed either way."""
    snake_json = rewrite_records(FULL_EVENT_JSON, snake)
    assert snake_json["actions"]["state_delta"] == {
        "user:snake_key": {"inner_key": [1, None]},
        "camelKey": 2,
    }
    assert snake_json["content"]["parts"][3]["inline_data"]["mime_type"] == "image/png"
    assert Event.from_json(json.dumps(snake_json)) == FULL_EVENT


def test_unknown_fields_are_ignored_top_level_and_nested() -> None:
    """R-EV-8 [2.13]: ``extra='ignore'``, including ADK fields trio_agents does not model."""
    data = {
        "id": "e",
        "timestamp": 1.0,
        "modelVersion": "gemini-2.5-flash",
        "nodeInfo": {"path": "root@1"},
        "groundingMetadata": {"webSearchQueries": ["q"]},
        "content": {
            "role": "model",
            "parts": [
                {"text": "hi", "videoMetadata": {"fps": 2}},
                {"functionCall": {"name": "f", "args": {}, "willContinue": True}},
            ],
            "somethingNew": 1,
        },
        "usageMetadata": {"totalTokenCount": 3, "trafficType": "ON_DEMAND"},
        "actions": {"transferReason": "why", "requestedToolConfirmations": {}, "route": "a"},
    }
    assert Event.from_dict(data) == Event(
        id="e",
        timestamp=1.0,
        content=Content(role="model", parts=(Part(text="hi"), Part.from_function_call("f"))),
        usage_metadata=UsageMetadata(total_token_count=3),
    )


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"", ""),
        (b"\x00", "AA=="),
        (b"ab", "YWI="),
        (b"\xfb\xff", "-_8="),
        (b"\xfb\xff\xbf", "-_-_"),
        (bytes(range(256)), base64.urlsafe_b64encode(bytes(range(256))).decode()),
    ],
)
def test_bytes_are_written_as_padded_url_safe_base64(data: bytes, text: str) -> None:
    """R-EV-8: bytes are base64, in the URL-safe alphabet with ``=`` padding, as pydantic (ADK)
    writes them (``ser_json_bytes="base64"``; verified against ADK 2.13 output)."""
    part = Part(inline_data=Blob(data=data), thought_signature=data)
    assert unstructure(part) == {"thoughtSignature": text, "inlineData": {"data": text}}
    assert structure(unstructure(part), Part) == part


@pytest.mark.parametrize("text", ["-_8=", "-_8", "+/8=", "+/8"])
def test_bytes_are_read_from_either_alphabet_padded_or_not(text: str) -> None:
    """ADK 2.13 reads all four spellings; so does trio_agents."""
    assert structure({"inlineData": {"data": text}}, Part).inline_data == Blob(data=b"\xfb\xff")


def test_long_running_tool_ids_are_a_sorted_list() -> None:
    """R-EV-8: a set is written as a sorted list; ADK writes ``[]`` on every call event."""
    event = Event(id="e", timestamp=1.0, long_running_tool_ids={"b", "c", "a"})
    assert event.to_dict()["longRunningToolIds"] == ["a", "b", "c"]
    empty = Event(id="e", timestamp=1.0, long_running_tool_ids=())
    assert empty.to_dict()["longRunningToolIds"] == []
    assert Event.from_json(empty.to_json()).long_running_tool_ids == frozenset()
    assert "longRunningToolIds" not in Event(id="e", timestamp=1.0).to_dict()


def test_integer_timestamp_is_written_as_a_float() -> None:
    """An int in a float field is written as it reads back, so the text is stable."""
    event = Event(id="e", timestamp=7)
    assert '"timestamp":7.0' in event.to_json()
    assert Event.from_json(event.to_json()).to_json() == event.to_json()
    loaded = Event.from_json('{"id": "e", "timestamp": 7}')
    assert loaded.timestamp == 7.0
    assert isinstance(loaded.timestamp, float)


# -- ADK 2.13 interop ----------------------------------------------------------------------------
# Written by google-adk 2.13.0 as described in the module docstring: ADK_API_EVENTS in the web
# API's form (camelCase), ADK_SQLITE_EVENTS in SqliteSessionService's form (snake_case), and
# ADK_IS_FINAL holds ADK's own ``event.is_final_response()`` for each event.

ADK_API_EVENTS: dict[str, str] = {
    "USER_TEXT": (
        '{"content":{"parts":[{"text":"What\'s the weather in Paris?"}],"role":"user"},'
        '"invocationId":"e-bd1b34b4-1aa1-4abd-ac58-024a86cef10a","author":"user",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"requestedAuthConfigs":{},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":""},'
        '"id":"053a7437-6575-4113-911c-8d9b92f82f5b","timestamp":1795418229.8921719}'
    ),
    "FUNCTION_CALL": (
        '{"content":{"parts":[{"functionCall":{"id":"adk-3727ede9-d60a-4833-b8db-61e433484d7b'
        '","args":{"city":"Paris","units":"metric"},"name":"get_weather"}}],"role":"model"},'
        '"invocationId":"e-bd1b34b4-1aa1-4abd-ac58-024a86cef10a","author":"weather_agent",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"requestedAuthConfigs":{},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":"weather_agent@1"},'
        '"longRunningToolIds":[],"id":"7a7fa6ce-7b62-441c-a5cd-ecd01beb1039",'
        '"timestamp":1795418229.9284542}'
    ),
    "FUNCTION_RESPONSE_STATE_ARTIFACT": (
        '{"content":{"parts":[{"functionResponse":{"id":"adk-3727ede9-d60a-4833-b8db-61e43348'
        '4d7b","name":"get_weather","response":{"city":"Paris","temperature":21.5,'
        '"conditions":["sunny","light wind"],"alert":null}}}],"role":"user"},'
        '"invocationId":"e-bd1b34b4-1aa1-4abd-ac58-024a86cef10a","author":"weather_agent",'
        '"actions":{"stateDelta":{"last_city":"Paris","user:units":"metric",'
        '"history":[{"city":"Paris","temp":21.5}]},"artifactDelta":{"report.txt":0},'
        '"requestedAuthConfigs":{},"requestedToolConfirmations":{}},'
        '"nodeInfo":{"path":"weather_agent@1"},"id":"649df913-37b6-4168-87d3-8cb40d59065d",'
        '"timestamp":1795418229.9313855}'
    ),
    "MODEL_TEXT_USAGE": (
        '{"content":{"parts":[{"text":"It is 21.5 °C and sunny in Paris."}],"role":"model"},'
        '"turnComplete":true,"finishReason":"STOP",'
        '"usageMetadata":{"candidatesTokenCount":12,"promptTokenCount":57,'
        '"totalTokenCount":69},"invocationId":"e-bd1b34b4-1aa1-4abd-ac58-024a86cef10a",'
        '"author":"weather_agent","actions":{"stateDelta":{},"artifactDelta":{},'
        '"requestedAuthConfigs":{},"requestedToolConfirmations":{}},'
        '"nodeInfo":{"path":"weather_agent@1"},"id":"5d3378a1-928a-4ded-9a22-13553b178fce",'
        '"timestamp":1795418229.9328206}'
    ),
    "TRANSFER": (
        '{"content":{"parts":[{"functionResponse":{"id":"adk-1076b8f3-828d-4d5f-ab3e-6b765491'
        '573d","name":"transfer_to_agent","response":{"result":null}}}],"role":"user"},'
        '"invocationId":"e-965152b2-0c74-4b09-9342-31a0416c431d","author":"coordinator",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"transferToAgent":"billing_loop",'
        '"requestedAuthConfigs":{},"requestedToolConfirmations":{}},'
        '"nodeInfo":{"path":"coordinator@1"},"id":"b4ba6573-ecca-4dcc-a7f3-bd0daebae057",'
        '"timestamp":1795418229.9398954}'
    ),
    "ESCALATE": (
        '{"content":{"parts":[{"functionResponse":{"id":"adk-b63d64a6-4658-470e-a0a4-575eda10'
        'd885","name":"exit_loop","response":{"result":null}}}],"role":"user"},'
        '"invocationId":"e-965152b2-0c74-4b09-9342-31a0416c431d","author":"billing",'
        '"actions":{"skipSummarization":true,"stateDelta":{},"artifactDelta":{},'
        '"escalate":true,"requestedAuthConfigs":{},"requestedToolConfirmations":{}},'
        '"nodeInfo":{"path":"coordinator@1/billing_loop@1"},'
        '"id":"97fbd93e-edb2-4164-97e3-c8be31d1ebca","timestamp":1795418229.9425702}'
    ),
    "LONG_RUNNING_CALL": (
        '{"content":{"parts":[{"functionCall":{"id":"adk-09ce2fe9-bd61-43f9-9b5b-24d3c468fef0'
        '","args":{"amount":250},"name":"request_approval"}}],"role":"model"},'
        '"invocationId":"e-1c6f6cd9-ac36-4536-915b-5d9c37f127cc","author":"approver",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"requestedAuthConfigs":{},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":"approver@1"},'
        '"longRunningToolIds":["adk-09ce2fe9-bd61-43f9-9b5b-24d3c468fef0"],'
        '"id":"e23d18fb-0c88-4fa2-b481-e98b2f2b134c","timestamp":1795418229.946387}'
    ),
    "INLINE_DATA": (
        '{"content":{"parts":[{"text":"Describe this"},'
        '{"inlineData":{"data":"iVBORw0KGgoAAAANSUhEUvv_vwAB","mimeType":"image/png"}}],'
        '"role":"user"},"invocationId":"e-ba634915-c5c8-4859-8d32-6d798fce0121",'
        '"author":"user","actions":{"stateDelta":{},"artifactDelta":{},'
        '"requestedAuthConfigs":{},"requestedToolConfirmations":{}},"nodeInfo":{"path":""},'
        '"id":"6e6be51d-a9e7-46ef-83ca-55e2c1c99054","timestamp":1795418229.9493842}'
    ),
    "ERROR": (
        '{"finishReason":"SAFETY","errorCode":"SAFETY",'
        '"errorMessage":"The response was blocked for safety reasons.",'
        '"invocationId":"e-ba634915-c5c8-4859-8d32-6d798fce0121","author":"vision",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"requestedAuthConfigs":{},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":"vision@1"},'
        '"id":"7b82d6bc-dede-4e83-aeec-cd65c86e1054","timestamp":1795418229.9506378}'
    ),
    "PARTIAL_THOUGHT": (
        '{"content":{"parts":[{"text":"Thinking about tides","thought":true,'
        '"thoughtSignature":"Evvvvv8Bc2ln"}],"role":"model"},"partial":true,'
        '"invocationId":"e-b200822f-4684-4412-9323-fdb1d5a52ae5","author":"tides",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"requestedAuthConfigs":{},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":"tides@1"},'
        '"id":"8a9cfef3-8b4d-493f-a3a7-e924d5cb674b","timestamp":1795418229.9534726}'
    ),
    "GEMINI_FINAL_WITH_DETAILS": (
        '{"modelVersion":"gemini-2.5-flash",'
        '"content":{"parts":[{"text":"Thinking about tides","thought":true,'
        '"thoughtSignature":"Evvvvv8Bc2ln"},{"text":"High tide is at 06:12."}],'
        '"role":"model"},"partial":false,"turnComplete":true,"finishReason":"STOP",'
        '"usageMetadata":{"candidatesTokenCount":9,"promptTokenCount":31,'
        '"promptTokensDetails":[{"modality":"TEXT","tokenCount":31}],"thoughtsTokenCount":40,'
        '"totalTokenCount":80,"trafficType":"ON_DEMAND"},'
        '"invocationId":"e-b200822f-4684-4412-9323-fdb1d5a52ae5","author":"tides",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"requestedAuthConfigs":{},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":"tides@1"},'
        '"id":"8a9cfef3-8b4d-493f-a3a7-e924d5cb674b","timestamp":1795418229.9554915}'
    ),
    "REQUEST_CREDENTIAL_CALL": (
        '{"content":{"parts":[{"functionCall":{"id":"adk-f9844426-5774-4606-8b38-b4484ef0d7dd'
        '","args":{"functionCallId":"adk-8fe4a098-b7c1-4156-81fc-d054405f6b8a",'
        '"authConfig":{"authScheme":{"type":"oauth2",'
        '"flows":{"authorizationCode":{"scopes":{"calendar.readonly":"Read your calendar"},'
        '"authorizationUrl":"https://accounts.example.com/o/oauth2/auth",'
        '"tokenUrl":"https://oauth2.example.com/token"}}},'
        '"rawAuthCredential":{"authType":"oauth2","oauth2":{"clientId":"client-123",'
        '"tokenEndpointAuthMethod":"client_secret_basic"}},'
        '"exchangedAuthCredential":{"authType":"oauth2","oauth2":{"clientId":"client-123",'
        '"authUri":"https://accounts.example.com/o/oauth2/auth?response_type=code&client_id=c'
        "lient-123&scope=calendar.readonly&state=96d2ywV5iBbK4HOfQVyIbZlo6Lw6SK&access_type=o"
        'ffline&prompt=consent","state":"96d2ywV5iBbK4HOfQVyIbZlo6Lw6SK",'
        '"tokenEndpointAuthMethod":"client_secret_basic"}},'
        '"credentialKey":"adk_oauth2_28b3458bec6f7bd2_oauth2_81f7f715ad243354"}},'
        '"name":"adk_request_credential"}}],"role":"user"},'
        '"invocationId":"e-89867d08-f49d-4f7b-a225-ea0a637e1b1f","author":"assistant",'
        '"actions":{"stateDelta":{},"artifactDelta":{},"requestedAuthConfigs":{},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":"assistant@1"},'
        '"longRunningToolIds":["adk-f9844426-5774-4606-8b38-b4484ef0d7dd"],'
        '"id":"0357d0b7-14fa-487c-8d7d-11487ffbadae","timestamp":1795418229.960261}'
    ),
    "AUTH_CONFIG_RESPONSE": (
        '{"content":{"parts":[{"functionResponse":{"id":"adk-8fe4a098-b7c1-4156-81fc-d054405f'
        '6b8a","name":"calendar","response":{"pending":true}}}],"role":"user"},'
        '"invocationId":"e-89867d08-f49d-4f7b-a225-ea0a637e1b1f","author":"assistant",'
        '"actions":{"stateDelta":{},"artifactDelta":{},'
        '"requestedAuthConfigs":{"adk-8fe4a098-b7c1-4156-81fc-d054405f6b8a":{"authScheme":{"t'
        'ype":"oauth2",'
        '"flows":{"authorizationCode":{"scopes":{"calendar.readonly":"Read your calendar"},'
        '"authorizationUrl":"https://accounts.example.com/o/oauth2/auth",'
        '"tokenUrl":"https://oauth2.example.com/token"}}},'
        '"rawAuthCredential":{"authType":"oauth2","oauth2":{"clientId":"client-123",'
        '"tokenEndpointAuthMethod":"client_secret_basic"}},'
        '"exchangedAuthCredential":{"authType":"oauth2","oauth2":{"clientId":"client-123",'
        '"authUri":"https://accounts.example.com/o/oauth2/auth?response_type=code&client_id=c'
        "lient-123&scope=calendar.readonly&state=96d2ywV5iBbK4HOfQVyIbZlo6Lw6SK&access_type=o"
        'ffline&prompt=consent","state":"96d2ywV5iBbK4HOfQVyIbZlo6Lw6SK",'
        '"tokenEndpointAuthMethod":"client_secret_basic"}},'
        '"credentialKey":"adk_oauth2_28b3458bec6f7bd2_oauth2_81f7f715ad243354"}},'
        '"requestedToolConfirmations":{}},"nodeInfo":{"path":"assistant@1"},'
        '"id":"5ef97d1f-8dff-4f22-b744-4c5e3393e407","timestamp":1795418229.9601245}'
    ),
}

ADK_SQLITE_EVENTS: dict[str, str] = {
    "FUNCTION_RESPONSE_STATE_ARTIFACT": (
        '{"content":{"parts":[{"function_response":{"id":"adk-3727ede9-d60a-4833-b8db-61e4334'
        '84d7b","name":"get_weather","response":{"city":"Paris","temperature":21.5,'
        '"conditions":["sunny","light wind"],"alert":null}}}],"role":"user"},'
        '"invocation_id":"e-bd1b34b4-1aa1-4abd-ac58-024a86cef10a","author":"weather_agent",'
        '"actions":{"state_delta":{"last_city":"Paris","user:units":"metric",'
        '"history":[{"city":"Paris","temp":21.5}]},"artifact_delta":{"report.txt":0},'
        '"requested_auth_configs":{},"requested_tool_confirmations":{}},'
        '"node_info":{"path":"weather_agent@1"},"id":"649df913-37b6-4168-87d3-8cb40d59065d",'
        '"timestamp":1795418229.9313855}'
    ),
    "INLINE_DATA": (
        '{"content":{"parts":[{"text":"Describe this"},'
        '{"inline_data":{"data":"iVBORw0KGgoAAAANSUhEUvv_vwAB","mime_type":"image/png"}}],'
        '"role":"user"},"invocation_id":"e-ba634915-c5c8-4859-8d32-6d798fce0121",'
        '"author":"user","actions":{"state_delta":{},"artifact_delta":{},'
        '"requested_auth_configs":{},"requested_tool_confirmations":{}},'
        '"node_info":{"path":""},"id":"6e6be51d-a9e7-46ef-83ca-55e2c1c99054",'
        '"timestamp":1795418229.9493842}'
    ),
    "PARTIAL_THOUGHT": (
        '{"content":{"parts":[{"text":"Thinking about tides","thought":true,'
        '"thought_signature":"Evvvvv8Bc2ln"}],"role":"model"},"partial":true,'
        '"invocation_id":"e-b200822f-4684-4412-9323-fdb1d5a52ae5","author":"tides",'
        '"actions":{"state_delta":{},"artifact_delta":{},"requested_auth_configs":{},'
        '"requested_tool_confirmations":{}},"node_info":{"path":"tides@1"},'
        '"id":"8a9cfef3-8b4d-493f-a3a7-e924d5cb674b","timestamp":1795418229.9534726}'
    ),
}

ADK_IS_FINAL = {
    "USER_TEXT": True,
    "FUNCTION_CALL": False,
    "FUNCTION_RESPONSE_STATE_ARTIFACT": False,
    "MODEL_TEXT_USAGE": True,
    "TRANSFER": False,
    "ESCALATE": True,
    "LONG_RUNNING_CALL": True,
    "INLINE_DATA": True,
    "ERROR": True,
    "PARTIAL_THOUGHT": False,
    "GEMINI_FINAL_WITH_DETAILS": True,
    "REQUEST_CREDENTIAL_CALL": True,
    "AUTH_CONFIG_RESPONSE": False,
}

PNG_HEAD = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + b"\xfb\xff\xbf\x00\x01"
THOUGHT_SIGNATURE = b"\x12\xfb\xef\xbe\xff\x01sig"


def modelled(adk: dict[str, Any]) -> dict[str, Any]:
    """ADK's JSON minus exactly the fields trio_agents does not model (module docstring)."""
    out = {k: v for k, v in adk.items() if k not in {"nodeInfo", "modelVersion"}}
    out["actions"] = {  # written only when not empty
        k: v for k, v in adk["actions"].items() if k != "requestedToolConfirmations" or v
    }
    if "usageMetadata" in adk:
        gemini_only = {"promptTokensDetails", "trafficType"}
        out["usageMetadata"] = {
            k: v for k, v in adk["usageMetadata"].items() if k not in gemini_only
        }
    return out


def adk_event(name: str) -> Event:
    return Event.from_json(ADK_API_EVENTS[name])


@pytest.mark.parametrize("name", ADK_API_EVENTS)
def test_adk_event_parses_and_redumps_equal(name: str) -> None:
    """ARCHITECTURE 'Events and content': an event dumped by ADK parses, and re-dumps equal on
    every field trio_agents models (R-EV-8)."""
    adk = json.loads(ADK_API_EVENTS[name])
    event = Event.from_json(ADK_API_EVENTS[name])
    assert json.loads(event.to_json()) == modelled(adk)
    assert Event.from_json(event.to_json()) == event


@pytest.mark.parametrize("name", ADK_API_EVENTS)
def test_adk_event_is_final_as_adk_says(name: str) -> None:
    """R-FIN-1..3 agree with ADK 2.13's own answer for the same event."""
    assert adk_event(name).is_final_response() is ADK_IS_FINAL[name]


def test_only_the_documented_adk_fields_are_dropped() -> None:
    """Apart from the Gemini metadata event, only ADK's two 2.13 defaults are dropped."""
    for name, text in ADK_API_EVENTS.items():
        adk = json.loads(text)
        ours = adk_event(name).to_dict()
        gemini = name == "GEMINI_FINAL_WITH_DETAILS"
        assert set(adk) - set(ours) == ({"nodeInfo", "modelVersion"} if gemini else {"nodeInfo"})
        assert set(adk["actions"]) - set(ours["actions"]) == {"requestedToolConfirmations"}


def test_adk_events_carry_what_adk_put_in_them() -> None:
    """The fields are read, not just passed through: each fixture's point, as values."""
    user = adk_event("USER_TEXT")
    assert (user.author, user.content, user.invocation_id[:2]) == (
        "user",
        Content.from_text("What's the weather in Paris?"),
        "e-",
    )
    assert user.timestamp == 1795418229.8921719

    call = adk_event("FUNCTION_CALL")
    [function_call] = call.get_function_calls()
    assert (function_call.name, function_call.args) == (
        "get_weather",
        {"city": "Paris", "units": "metric"},
    )
    assert function_call.id is not None
    assert function_call.id.startswith("adk-")  # R-EV-6
    assert call.long_running_tool_ids == frozenset()

    response = adk_event("FUNCTION_RESPONSE_STATE_ARTIFACT")
    [function_response] = response.get_function_responses()
    assert function_response.id == function_call.id
    assert function_response.response["conditions"] == ["sunny", "light wind"]
    assert response.content is not None
    assert response.content.role == "user"  # R-EV-4: authored by the agent, role 'user'
    assert response.author == "weather_agent"
    assert response.actions.state_delta == {
        "last_city": "Paris",
        "user:units": "metric",
        "history": [{"city": "Paris", "temp": 21.5}],
    }
    assert response.actions.artifact_delta == {"report.txt": 0}

    text = adk_event("MODEL_TEXT_USAGE")
    assert text.text == "It is 21.5 °C and sunny in Paris."
    assert text.usage_metadata == UsageMetadata(
        prompt_token_count=57, candidates_token_count=12, total_token_count=69
    )
    assert (text.finish_reason, text.turn_complete) == ("STOP", True)

    assert adk_event("TRANSFER").actions.transfer_to_agent == "billing_loop"
    escalate = adk_event("ESCALATE").actions
    assert (escalate.escalate, escalate.skip_summarization) == (True, True)

    long_running = adk_event("LONG_RUNNING_CALL")
    assert long_running.long_running_tool_ids == {long_running.get_function_calls()[0].id}

    image = adk_event("INLINE_DATA").content
    assert image is not None
    assert image.parts[1].inline_data == Blob(mime_type="image/png", data=PNG_HEAD)

    error = adk_event("ERROR")
    assert (error.content, error.error_code, error.finish_reason) == (None, "SAFETY", "SAFETY")
    assert error.error_message == "The response was blocked for safety reasons."

    chunk = adk_event("PARTIAL_THOUGHT")
    assert chunk.partial is True
    assert chunk.content is not None
    assert chunk.content.parts == (
        Part(text="Thinking about tides", thought=True, thought_signature=THOUGHT_SIGNATURE),
    )
    final = adk_event("GEMINI_FINAL_WITH_DETAILS")
    assert final.id == chunk.id  # R-EV-5: chunks and the final aggregate share one id
    assert (final.partial, final.text) == (False, "High tide is at 06:12.")
    assert final.usage_metadata is not None
    assert final.usage_metadata.thoughts_token_count == 40

    credential = adk_event("REQUEST_CREDENTIAL_CALL")
    [request] = credential.get_function_calls()
    assert request.name == "adk_request_credential"
    assert credential.long_running_tool_ids == {request.id}
    auth = adk_event("AUTH_CONFIG_RESPONSE")
    [(call_id, config)] = auth.actions.requested_auth_configs.items()
    assert call_id == request.args["functionCallId"]
    assert config == request.args["authConfig"]
    assert config["authScheme"]["type"] == "oauth2"


@pytest.mark.parametrize("name", ADK_SQLITE_EVENTS)
def test_adk_sqlite_snake_case_events_read_like_the_api_ones(name: str) -> None:
    """R-EV-8: ADK's own snake_case form (``model_dump_json(exclude_none=True)``) reads the same."""
    text = ADK_SQLITE_EVENTS[name]
    assert '"invocation_id"' in text
    assert Event.from_json(text) == adk_event(name)
    assert Event.from_json(text.encode()) == adk_event(name)


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "{'id': 'e'}",
        '{"id": "e",}',
        b"\xff\xfe{}",
        "NaN",
        '{"timestamp": NaN}',
        '{"timestamp": Infinity}',
        '{"actions": {"stateDelta": {"x": -Infinity}}}',
        '{"customMetadata": {"x": 1e400}}',
    ],
)
def test_malformed_json_raises_serialization_error(text: str | bytes) -> None:
    """Not JSON (and NaN, Infinity, overflowing numbers are not JSON) is refused on input."""
    with pytest.raises(SerializationError, match="invalid JSON") as info:
        Event.from_json(text)
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize("text", ["[]", "3", '"event"', "null"])
def test_a_non_object_event_raises(text: str) -> None:
    with pytest.raises(SerializationError, match="expected an object") as info:
        Event.from_json(text)
    assert info.value.path == ""


BAD_EVENTS = [
    pytest.param({"timestamp": "now"}, "timestamp", id="str-timestamp"),
    pytest.param({"timestamp": True}, "timestamp", id="bool-timestamp"),
    pytest.param({"timestamp": 10**400}, "timestamp", id="huge-int-timestamp"),
    pytest.param({"author": 3}, "author", id="int-author"),
    pytest.param({"partial": "yes"}, "partial", id="str-partial"),
    pytest.param({"turn_complete": 1}, "turnComplete", id="int-bool-snake"),
    pytest.param({"content": "hi"}, "content", id="str-content"),
    pytest.param({"content": {"parts": {}}}, "content.parts", id="dict-parts"),
    pytest.param({"content": {"parts": ["x"]}}, "content.parts[0]", id="str-part"),
    pytest.param(
        {"content": {"parts": [{}, {"functionCall": {"args": {}}}]}},
        "content.parts[1].functionCall",
        id="call-without-name",
    ),
    pytest.param(
        {"content": {"parts": [{"functionCall": {"name": "f", "args": []}}]}},
        "content.parts[0].functionCall.args",
        id="list-args",
    ),
    pytest.param(
        {"content": {"parts": [{"inlineData": {"data": 5}}]}},
        "content.parts[0].inlineData.data",
        id="int-bytes",
    ),
    pytest.param(
        {"content": {"parts": [{"inline_data": {"data": "not base64!"}}]}},
        "content.parts[0].inlineData.data",
        id="bad-base64",
    ),
    pytest.param(
        {"content": {"parts": [{"thoughtSignature": "a"}]}},
        "content.parts[0].thoughtSignature",
        id="truncated-base64",
    ),
    pytest.param(
        {"content": {"parts": [{"text": "x", "thought": "no"}]}},
        "content.parts[0].thought",
        id="str-thought",
    ),
    pytest.param(
        {"usageMetadata": {"promptTokenCount": 1.5}},
        "usageMetadata.promptTokenCount",
        id="float-count",
    ),
    pytest.param(
        {"usage_metadata": {"total_token_count": True}},
        "usageMetadata.totalTokenCount",
        id="bool-count-snake",
    ),
    pytest.param({"longRunningToolIds": "abc"}, "longRunningToolIds", id="str-ids"),
    pytest.param({"longRunningToolIds": ["a", 1]}, "longRunningToolIds", id="int-id"),
    pytest.param({"actions": []}, "actions", id="list-actions"),
    pytest.param({"actions": {"stateDelta": []}}, "actions.stateDelta", id="list-state-delta"),
    pytest.param({"actions": {"escalate": "true"}}, "actions.escalate", id="str-escalate"),
    pytest.param(
        {"actions": {"artifactDelta": {"a.txt": 1, "f.txt": "1"}}},
        "actions.artifactDelta['f.txt']",
        id="str-artifact-version",
    ),
    pytest.param(
        {"actions": {"artifact_delta": {"f.txt": True}}},
        "actions.artifactDelta['f.txt']",
        id="bool-artifact-version",
    ),
    pytest.param({"customMetadata": "x"}, "customMetadata", id="str-custom-metadata"),
]


@pytest.mark.parametrize(("data", "path"), BAD_EVENTS)
def test_wrong_types_raise_naming_the_path(data: dict[str, Any], path: str) -> None:
    """Malformed input raises :class:`SerializationError` naming where (camelCase path)."""
    with pytest.raises(SerializationError) as info:
        Event.from_dict({"id": "e", "timestamp": 1.0, **data})
    assert info.value.path == path
    assert path in str(info.value)
    with pytest.raises(SerializationError) as again:
        Event.from_json(json.dumps({"id": "e", "timestamp": 1.0, **data}))
    assert again.value.path == path


def test_structure_prefixes_the_given_path() -> None:
    with pytest.raises(SerializationError) as info:
        structure({"parts": [{"text": 1}]}, Content, "message")
    assert info.value.path == "message.parts[0].text"
    with pytest.raises(SerializationError) as info:
        structure("x", Part, "content.parts[2]")
    assert info.value.path == "content.parts[2]"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        pytest.param({1, 2}, "state", id="set"),
        pytest.param(object(), "state", id="object"),
        pytest.param(b"raw", "state", id="bytes"),
        pytest.param(math.nan, "state", id="nan"),
        pytest.param(math.inf, "state", id="inf"),
        pytest.param(-math.inf, "state", id="-inf"),
        pytest.param([1, 2, datetime.date(2024, 1, 1)], "state[2]", id="date-in-list"),
        pytest.param({"a": [1, {"b": {3}}]}, "state['a'][1]['b']", id="nested-set"),
        pytest.param({"ok": 1, 7: "x"}, "state[7]", id="int-key"),
        pytest.param({"a": {None: 1}}, "state['a'][None]", id="none-key"),
    ],
)
def test_check_json_value_names_the_bad_value(value: Any, path: str) -> None:
    with pytest.raises(SerializationError) as info:
        check_json_value(value, "state")
    assert info.value.path == path
    assert "state" in str(info.value)


def test_check_json_value_accepts_plain_json() -> None:
    check_json_value({"a": [1, 2.5, "x", None, True, {"b": []}], "t": (1, 2)}, "state")
    check_json_value(-0.0, "state")
    check_json_value(10**30, "state")


_NOT_JSON = st.sampled_from([{1}, object(), b"raw", math.nan, math.inf, datetime.date(2024, 1, 1)])
_MIXED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3) | _NOT_JSON,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3) | st.integers() | st.none(), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(value=_MIXED, _seed=st.random_module())
def test_is_json_value_agrees_with_check_json_value(value: Any, _seed: Any) -> None:
    try:
        check_json_value(value, "v")
    except SerializationError:
        accepted = False
    else:
        accepted = True
    assert is_json_value(value) is accepted


@pytest.mark.parametrize(
    ("event", "path"),
    [
        pytest.param(
            Event(actions=EventActions(state_delta={"ok": 1, "k": {1, 2}})),
            "event['actions']['stateDelta']['k']",
            id="set-in-state-delta",
        ),
        pytest.param(
            Event(
                content=Content.from_parts(
                    Part.from_text("t"),
                    Part.from_function_call("f", {"when": datetime.date(2024, 1, 1)}),
                )
            ),
            "event['content']['parts'][1]['functionCall']['args']['when']",
            id="date-in-args",
        ),
        pytest.param(
            Event(custom_metadata={"score": math.nan}),
            "event['customMetadata']['score']",
            id="nan-in-metadata",
        ),
        pytest.param(
            Event(actions=EventActions(requested_auth_configs={"c": {"x": [object()]}})),
            "event['actions']['requestedAuthConfigs']['c']['x'][0]",
            id="object-in-auth-config",
        ),
    ],
)
def test_to_json_names_the_value_json_cannot_carry(event: Event, path: str) -> None:
    """Writing fails with a :class:`SerializationError` that names the bad value."""
    with pytest.raises(SerializationError) as info:
        event.to_json()
    assert info.value.path == path
    assert path in str(info.value)
    assert isinstance(info.value.__cause__, (TypeError, ValueError))


def test_dumps_of_a_self_containing_list_raises_serialization_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(SerializationError, match="cannot encode as JSON") as info:
        dumps(loop)
    assert info.value.path == "value"


def test_serialization_error_is_a_value_error_and_a_trio_agents_error() -> None:
    with pytest.raises(ValueError, match="invalid JSON"):
        loads("{")
    assert issubclass(SerializationError, TrioAgentsError)
    assert SerializationError("m", path="p").path == "p"


# -- checkpoint and confirmation actions (ADK 2.13) ----------------------------------------------

# Written by google-adk 2.13.0: ``Event(author="a", invocation_id="i", actions=EventActions(
# agent_state={"current_sub_agent": "x"}, end_of_agent=True, requested_tool_confirmations={"fc1":
# ToolConfirmation(hint="h", payload={"a": 1})}))``, then with ``end_of_agent=False``,
# ``agent_state={}`` and no payload; ``model_dump_json(by_alias=True, exclude_none=True)``.
ADK_CHECKPOINT_ACTIONS = [
    (
        '{"invocationId":"i","author":"a","actions":{"stateDelta":{},"artifactDelta":{},'
        '"requestedAuthConfigs":{},"requestedToolConfirmations":{"fc1":{"hint":"h",'
        '"confirmed":false,"payload":{"a":1}}},"endOfAgent":true,'
        '"agentState":{"current_sub_agent":"x"}},"nodeInfo":{"path":""},'
        '"id":"2a093511-78e5-4881-9f3c-be3b81f62a5d","timestamp":1795700844.364223}'
    ),
    (
        '{"invocationId":"i","author":"a","actions":{"stateDelta":{},"artifactDelta":{},'
        '"requestedAuthConfigs":{},"requestedToolConfirmations":{"fc1":{"hint":"h",'
        '"confirmed":false}},"endOfAgent":false,"agentState":{}},"nodeInfo":{"path":""},'
        '"id":"40bc6087-1581-4e30-a2e6-da62ac9814f3","timestamp":1795700844.3643246}'
    ),
]


def test_adk_checkpoint_and_confirmation_actions_parse_and_redump_equal() -> None:
    first, second = (Event.from_json(text) for text in ADK_CHECKPOINT_ACTIONS)
    assert first.actions.agent_state == {"current_sub_agent": "x"}
    assert first.actions.end_of_agent is True
    assert first.actions.requested_tool_confirmations == {
        "fc1": ToolConfirmation(hint="h", payload={"a": 1})
    }
    assert second.actions.agent_state == {} and second.actions.end_of_agent is False
    assert not first.actions.is_empty() and not second.actions.is_empty()
    for text, event in zip(ADK_CHECKPOINT_ACTIONS, (first, second), strict=True):
        assert json.loads(event.to_json()) == modelled(json.loads(text))


def test_checkpoint_fields_default_to_absent() -> None:
    actions = EventActions()
    assert actions.agent_state is None and actions.end_of_agent is None
    assert actions.requested_tool_confirmations == {} and actions.is_empty()
    written = Event(id="e", timestamp=1.0).to_dict()["actions"]
    assert not {"agentState", "endOfAgent", "requestedToolConfirmations"} & written.keys()


@pytest.mark.parametrize(
    ("confirmations", "path"),
    [
        ({"c": {"confirmed": "yes"}}, "actions.requestedToolConfirmations['c']"),
        ({"c": {"hint": 3}}, "actions.requestedToolConfirmations['c']"),
        ({"c": [1]}, "actions.requestedToolConfirmations['c']"),
        ([1], "actions.requestedToolConfirmations"),
    ],
)
def test_malformed_confirmations_are_refused_naming_the_path(confirmations: Any, path: str) -> None:
    data = {"id": "e", "actions": {"requestedToolConfirmations": confirmations}}
    with pytest.raises(SerializationError) as caught:
        Event.from_dict(data)
    assert caught.value.path == path


def test_requested_tool_confirmations_hold_tool_confirmations() -> None:
    with pytest.raises(ConfigurationError, match=r"requested_tool_confirmations\['c'\] must be a"):
        EventActions(requested_tool_confirmations={"c": {"confirmed": True}})  # type: ignore[dict-item]
