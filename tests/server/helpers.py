"""Apps and an SSE reader for the HTTP API tests."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx
import pytest
import trio

from trio_agents import (
    BaseAgent,
    Content,
    Event,
    EventActions,
    InvocationContext,
    LlmAgent,
    Part,
    ToolContext,
)
from trio_agents.models import LlmRequest, LlmResponse
from trio_agents.sessions import InMemorySessionService, SessionService, SqliteSessionService
from trio_agents.testing import ScriptedModel


@attrs.frozen
class Frame:
    """One SSE frame as a client sees it."""

    event: str | None
    id: int | None
    data: Any


class SseReader:
    """The frames of an SSE response as they arrive (comments skipped): ``await reader.next()``,
    ``await reader.rest()`` or ``async for``.

    A class rather than an async generator, so leaving a stream early leaves nothing of ours
    unfinished (httpx's own generators are another matter: see ``HTTPX_LEFT_EARLY``).
    """

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()

    def __aiter__(self) -> SseReader:
        return self

    async def __anext__(self) -> Frame:
        fields: dict[str, str] = {}
        async for line in self._lines:
            if not line:
                if "data" in fields:
                    ident = fields.get("id")
                    seq = None if ident is None else int(ident)
                    return Frame(fields.get("event"), seq, json.loads(fields["data"]))
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        raise StopAsyncIteration

    async def next(self) -> Frame:
        return await anext(self)

    async def rest(self) -> list[Frame]:
        return [frame async for frame in self]


async def read_frames(response: httpx.Response) -> list[Frame]:
    return await SseReader(response).rest()


HTTPX_LEFT_EARLY = [
    # Leaving a streamed response early abandons httpx's and httpcore's nested async generators;
    # trio reports each with a ResourceWarning (encode/httpx#3686). Only those are ignored.
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]


def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """The weather of a city (sets state ``x``)."""
    tool_context.state["x"] = 1
    return {"weather": "sunny", "city": city}


def _weather_reply(request: LlmRequest) -> Any:
    last = request.contents[-1]
    if any(part.function_response for part in last.parts):
        return ["It is ", "sunny.", "It is sunny."]
    call = Part.from_function_call("get_weather", {"city": "Paris"})
    return LlmResponse(content=Content(role="model", parts=[call]))


def weather_agent() -> LlmAgent:
    """ADK's S-API-3 app: a function call, its response (state ``x``), a streamed answer."""
    model = ScriptedModel(_weather_reply)
    return LlmAgent(name="weather", model=model, instruction="Help.", tools=[get_weather])


class Gated(BaseAgent):
    """Calls ``wait``, waits for ``gate`` (forever when None), answers the call, says ``done``."""

    gate: Any = None
    entered: Any = None

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        call_id = f"call-{ctx.invocation_id}"
        call = Part.from_function_call("wait", {}, id=call_id)
        await ctx.emit(Event(content=Content(role="model", parts=[call])))
        if self.entered is not None:
            self.entered.set()
        if self.gate is None:
            await trio.sleep_forever()
        await self.gate.wait()
        answer = Part.from_function_response("wait", {"ok": True}, id=call_id)
        await ctx.emit(Event(content=Content(role="user", parts=[answer])))
        await ctx.emit(Event(content=Content.from_text("done", role="model")))


class Failing(BaseAgent):
    """Emits one event with a state change, then raises ``ValueError``."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(actions=EventActions(state_delta={"before": 1})))
        raise ValueError("the agent broke")


def user_text(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


@contextlib.asynccontextmanager
async def session_service(kind: str, tmp_path: Any) -> AsyncIterator[SessionService]:
    """An in-memory (``"memory"``) or SQLite file (``"sqlite"``) session service."""
    if kind == "memory":
        yield InMemorySessionService()
        return
    async with SqliteSessionService(str(tmp_path / "sessions.db")) as service:
        yield service


# -- reading events as JSON ------------------------------------------------------------------------


def _parts(event: dict[str, Any]) -> list[dict[str, Any]]:
    return list((event.get("content") or {}).get("parts", []))


def json_calls(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The function calls named ``name`` in JSON ``events``, in order."""
    return [
        part["functionCall"]
        for event in events
        for part in _parts(event)
        if part.get("functionCall", {}).get("name") == name
    ]


def json_responses(events: list[dict[str, Any]], author: str) -> list[dict[str, Any]]:
    """The function responses in the JSON ``events`` of ``author``, in order."""
    return [
        part["functionResponse"]
        for event in events
        if event["author"] == author
        for part in _parts(event)
        if "functionResponse" in part
    ]


def json_texts(events: list[dict[str, Any]]) -> list[str]:
    """The texts of JSON ``events``, in order."""
    return [part["text"] for event in events for part in _parts(event) if "text" in part]
