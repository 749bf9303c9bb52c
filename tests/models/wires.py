"""The wire side of each provider's fake server (see ``fake_provider.py``), and what each client
must have sent: Gemini ``generateContent``, OpenAI Chat Completions, Anthropic Messages.

Each adapter turns a provider-neutral :class:`Reply` into the provider's JSON answer and SSE
frames, reads the tool name and tool result out of a request body, and checks the request bodies
of the contract scenarios (``check_hello``, ``check_stream``, ``check_agent``) field by field.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from trio_agents.models import AnthropicModel, GeminiModel, HttpModel, LlmResponse, OpenAIModel

from . import anthropic_payloads as anthropic, gemini_payloads as gemini
from .fake_provider import ARGS, CHECKING, QUESTION, SKY, FakeProvider, Reply, Wire, tool_answer

# -- Gemini ----------------------------------------------------------------------------------------


@attrs.frozen
class GeminiWire:
    """``POST /v1beta/models/{model}:generateContent`` (or ``:streamGenerateContent?alt=sse``);
    the key in ``x-goog-api-key``. ``call_id`` is the id the API gives its function call."""

    call_id: str | None = "fc-1"
    key: str = gemini.KEY
    route: str = "/v1beta/models/{target:path}"
    keep_alive: str = ": keep-alive\r\n\r\n"
    first_text_frame: int = 0
    unauthorized_marker: str = "UNAUTHENTICATED"

    def model(self, url: str, **kwargs: Any) -> HttpModel:
        kwargs.setdefault("api_key", self.key)
        return GeminiModel("gemini-test", base_url=url, **kwargs)

    def authorized(self, request: Request) -> bool:
        return (
            request.headers.get("x-goog-api-key") == self.key and "key" not in request.query_params
        )

    def unauthorized(self) -> Response:
        error = {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}
        return JSONResponse({"error": error}, status_code=401)

    def error_body(self, status: int) -> str:
        return json.dumps({"error": {"code": status, "message": "failure", "status": "INTERNAL"}})

    def streams(self, request: Request, body: dict[str, Any]) -> bool:
        return str(request.path_params["target"]).endswith(":streamGenerateContent")

    def tool_name(self, body: dict[str, Any]) -> str | None:
        tools = body.get("tools")
        return str(tools[0]["functionDeclarations"][0]["name"]) if tools else None

    def tool_result(self, body: dict[str, Any]) -> str | None:
        parts = body["contents"][-1]["parts"]
        results = [p["functionResponse"] for p in parts if "functionResponse" in p]
        return str(results[0]["response"]["sky"]) if results else None

    def chunks(self, reply: Reply) -> list[dict[str, Any]]:
        if reply.blocked:
            return [{"promptFeedback": {"blockReason": "SAFETY"}}]
        last = gemini.call(reply.call, ARGS, self.call_id) if reply.call else None
        return gemini.streamed(reply.words, last=last)

    def frames(self, reply: Reply) -> list[str]:
        return [gemini.sse(c) for c in self.chunks(reply)]

    def answer(self, reply: Reply) -> dict[str, Any]:
        """The non-streamed answer: the chunks' parts in one candidate, text joined."""
        chunks = self.chunks(reply)
        if "candidates" not in chunks[-1]:
            return chunks[-1]
        parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
        joined = gemini.text("".join(p["text"] for p in parts if "text" in p))
        others = [p for p in parts if "text" not in p]
        extra = {k: chunks[-1][k] for k in ("usageMetadata", "modelVersion")}
        return gemini.answer(joined, *others, **extra)

    def check_hello(self, server: FakeProvider, response: LlmResponse) -> None:
        assert response.usage_metadata is not None
        assert response.model_version == "gemini-test-001"
        assert server.bodies == [{"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}]
        assert server.paths == ["/v1beta/models/gemini-test:generateContent"]

    def check_stream(self, server: FakeProvider, seen: list[LlmResponse]) -> None:
        assert server.paths == ["/v1beta/models/gemini-test:streamGenerateContent?alt=sse"]

    def check_agent(self, server: FakeProvider, streaming: bool) -> None:
        first, second = server.bodies
        declaration = first["tools"][0]["functionDeclarations"][0]
        assert declaration["name"] == "get_weather"
        assert declaration["parametersJsonSchema"]["properties"]["city"]["type"] == "string"
        assert "Help." in first["systemInstruction"]["parts"][0]["text"]
        assert first["contents"] == [{"role": "user", "parts": [{"text": QUESTION}]}]
        model_turn, tool_turn = second["contents"][-2:]
        sent_call: dict[str, Any] = {"name": "get_weather", "args": ARGS}
        sent_result: dict[str, Any] = {"name": "get_weather", "response": tool_answer(SKY)}
        if self.call_id is not None:  # the API's id is echoed; the client's own adk- ids are not
            sent_call["id"] = sent_result["id"] = self.call_id
        assert model_turn == {
            "role": "model",
            "parts": [{"text": CHECKING}, {"functionCall": sent_call}],
        }
        assert tool_turn == {"role": "user", "parts": [{"functionResponse": sent_result}]}
        kind = "streamGenerateContent?alt=sse" if streaming else "generateContent"
        assert server.paths == [f"/v1beta/models/gemini-test:{kind}"] * 2


# -- OpenAI ----------------------------------------------------------------------------------------

OPENAI_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@attrs.frozen
class OpenAIWire:
    """``POST /v1/chat/completions``, streamed when the body says ``"stream": true``; the key as
    a bearer token."""

    call_id: str = "call_1"
    key: str = "sk-fake-server-key-0123456789"
    route: str = "/v1/chat/completions"
    keep_alive: str = ": keep-alive\n\n"
    first_text_frame: int = 1  # after the role-only first chunk
    unauthorized_marker: str = "no key"

    def model(self, url: str, **kwargs: Any) -> HttpModel:
        kwargs.setdefault("api_key", self.key)
        return OpenAIModel("gpt-fake", base_url=f"{url}/v1", **kwargs)

    def authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.key}"

    def unauthorized(self) -> Response:
        return JSONResponse({"error": {"message": "no key"}}, status_code=401)

    def error_body(self, status: int) -> str:
        return json.dumps({"error": {"message": "failure", "code": status}})

    def streams(self, request: Request, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def tool_name(self, body: dict[str, Any]) -> str | None:
        tools = body.get("tools")
        return str(tools[0]["function"]["name"]) if tools else None

    def tool_result(self, body: dict[str, Any]) -> str | None:
        last = body["messages"][-1]
        return str(json.loads(last["content"])["sky"]) if last["role"] == "tool" else None

    def call(self, reply: Reply) -> dict[str, Any] | None:
        if reply.call is None:
            return None
        function = {"name": reply.call, "arguments": json.dumps(ARGS)}
        return {"id": self.call_id, "type": "function", "function": function}

    def answer(self, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.words)}
        call = self.call(reply)
        if call:
            message["tool_calls"] = [call]
        choice = {"index": 0, "message": message, "finish_reason": _finish(call)}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-fake",
            "choices": [choice],
            "usage": OPENAI_USAGE,
        }

    def frames(self, reply: Reply) -> list[str]:
        call = self.call(reply)
        chunks = [
            _chunk({"role": "assistant", "content": ""}),
            *[_chunk({"content": w}) for w in reply.words],
            *_call_chunks(call),
            _chunk({}, _finish(call)),
            {"choices": [], "usage": OPENAI_USAGE},
        ]
        return [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]

    def check_hello(self, server: FakeProvider, response: LlmResponse) -> None:
        assert response.usage_metadata is not None
        assert server.bodies[0]["messages"] == [{"role": "user", "content": "Hi"}]
        assert "stream" not in server.bodies[0]

    def check_stream(self, server: FakeProvider, seen: list[LlmResponse]) -> None:
        assert server.bodies[0]["stream"] is True
        assert seen[-1].partial is False  # the aggregate

    def check_agent(self, server: FakeProvider, streaming: bool) -> None:
        first, second = server.bodies
        assert first["tools"][0]["function"]["name"] == "get_weather"
        assert first["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] == "string"
        assert first["messages"][0]["role"] == "system"
        assert "Help." in first["messages"][0]["content"]
        assert first["messages"][-1] == {"role": "user", "content": QUESTION}
        assert all(bool(b.get("stream")) is streaming for b in server.bodies)
        assistant, tool = second["messages"][-2:]
        assert assistant["role"] == "assistant"
        assert assistant["content"] == CHECKING
        assert assistant["tool_calls"][0]["id"] == self.call_id
        assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == ARGS
        assert tool == {
            "role": "tool",
            "tool_call_id": self.call_id,
            "content": json.dumps(tool_answer(SKY)),
        }


def _finish(call: dict[str, Any] | None) -> str:
    return "tool_calls" if call else "stop"


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {"object": "chat.completion.chunk", "model": "gpt-fake", "choices": [choice]}


def _call_chunks(call: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A tool call as the API streams it: the head with the name, then the arguments in pieces."""
    if call is None:
        return []
    arguments = call["function"]["arguments"]
    head = {"index": 0, "id": call["id"], "type": "function"}
    head["function"] = {"name": call["function"]["name"], "arguments": ""}
    pieces = [arguments[i : i + 4] for i in range(0, len(arguments), 4)]
    return [
        _chunk({"tool_calls": [head]}),
        *[_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces],
    ]


# -- Anthropic -------------------------------------------------------------------------------------


@attrs.frozen
class AnthropicWire:
    """``POST /v1/messages``, streamed when the body says ``"stream": true``; the key in
    ``x-api-key``. Streams carry a ``ping`` event after the first text delta, as the API may."""

    call_id: str = "toolu_42"
    key: str = "sk-ant-server-test"
    route: str = "/v1/messages"
    keep_alive: str = ": keep-alive\n\n"
    first_text_frame: int = 2  # after message_start and the text block's start
    unauthorized_marker: str = "authentication_error"

    def model(self, url: str, **kwargs: Any) -> HttpModel:
        kwargs.setdefault("api_key", self.key)
        return AnthropicModel("claude-test", base_url=url, **kwargs)

    def authorized(self, request: Request) -> bool:
        return request.headers.get("x-api-key") == self.key

    def unauthorized(self) -> Response:
        error = {"type": "authentication_error", "message": "invalid x-api-key"}
        return JSONResponse({"type": "error", "error": error}, status_code=401)

    def error_body(self, status: int) -> str:
        kind = "invalid_request_error" if status < 500 else "api_error"
        return json.dumps({"type": "error", "error": {"type": kind, "message": "failure"}})

    def streams(self, request: Request, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def tool_name(self, body: dict[str, Any]) -> str | None:
        tools = body.get("tools")
        return str(tools[0]["name"]) if tools else None

    def tool_result(self, body: dict[str, Any]) -> str | None:
        content = body["messages"][-1]["content"]
        blocks = [b for b in content if b.get("type") == "tool_result"]
        return str(json.loads(blocks[0]["content"])["sky"]) if blocks else None

    def call(self, name: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": self.call_id, "name": name, "input": ARGS}

    def answer(self, reply: Reply) -> dict[str, Any]:
        content = [{"type": "text", "text": "".join(reply.words)}]
        if reply.call:
            content.append(self.call(reply.call))
        return anthropic.answer(content=content, stop_reason=_stop(reply))

    def frames(self, reply: Reply) -> list[str]:
        head, *rest = [anthropic.delta(0, "text_delta", text=w) for w in reply.words]
        events = [
            anthropic.message_start(),
            anthropic.block_start(0, {"type": "text", "text": ""}),
            head,
            {"type": "ping"},
            *rest,
            anthropic.block_stop(0),
            *(self.call_events(reply.call) if reply.call else []),
            anthropic.message_delta(_stop(reply)),
            anthropic.MESSAGE_STOP,
        ]
        return [anthropic.sse_frame(e) for e in events]

    def call_events(self, name: str) -> list[dict[str, Any]]:
        """A tool_use block as the API streams it: the input as partial JSON pieces."""
        return [
            anthropic.block_start(1, {**self.call(name), "input": {}}),
            anthropic.delta(1, "input_json_delta", partial_json=""),
            anthropic.delta(1, "input_json_delta", partial_json='{"city": '),
            anthropic.delta(1, "input_json_delta", partial_json='"Paris"}'),
            anthropic.block_stop(1),
        ]

    def check_hello(self, server: FakeProvider, response: LlmResponse) -> None:
        assert response.usage_metadata is not None
        assert server.bodies[0]["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
        ]
        assert "stream" not in server.bodies[0]

    def check_stream(self, server: FakeProvider, seen: list[LlmResponse]) -> None:
        assert server.bodies[0]["stream"] is True
        assert server.headers[0]["x-api-key"] == self.key
        assert server.headers[0]["anthropic-version"] == "2023-06-01"
        assert seen[-1].partial is False

    def check_agent(self, server: FakeProvider, streaming: bool) -> None:
        first, second = server.bodies
        assert [t["name"] for t in first["tools"]] == ["get_weather"]
        assert first["tools"][0]["input_schema"]["properties"]["city"]["type"] == "string"
        assert "Help." in json.dumps(first["system"])
        assert first["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]}
        ]
        assert all(b.get("stream", False) is streaming for b in server.bodies)
        messages = second["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert messages[1]["content"] == [
            {"type": "text", "text": CHECKING},
            self.call("get_weather"),
        ]
        [result] = messages[2]["content"]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == self.call_id
        assert json.loads(result["content"]) == tool_answer(SKY)


def _stop(reply: Reply) -> str:
    return "tool_use" if reply.call else "end_turn"


WIRES: dict[str, Wire] = {
    "gemini": GeminiWire(),
    "openai": OpenAIWire(),
    "anthropic": AnthropicWire(),
}
