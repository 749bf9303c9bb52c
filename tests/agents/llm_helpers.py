"""Shared helpers for the LLM agent tests: scripted responses and a chat driver."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trio_agents import (
    BaseAgent,
    Content,
    Event,
    InMemoryRunner,
    Part,
    RunConfig,
    Runner,
    Session,
    StreamingMode,
)
from trio_agents.models import LlmResponse

SSE = RunConfig(streaming_mode=StreamingMode.SSE)


def identity(name: str, description: str = "") -> str:
    """The identity sentence the flow appends to the system instruction (R-LLM-3.5)."""
    text = f'You are an agent. Your internal name is "{name}".'
    if description:
        text += f' The description about you is "{description}".'
    return text


def call(name: str, args: Mapping[str, Any] | None = None, *, id: str | None = None) -> Part:
    return Part.from_function_call(name, dict(args or {}), id=id)


def calls(*parts: Part, text: str | None = None) -> LlmResponse:
    """A model response calling tools (optionally with a leading text part)."""
    leading = [Part.from_text(text)] if text is not None else []
    return LlmResponse(content=Content(role="model", parts=[*leading, *parts]))


def fc(name: str, args: Mapping[str, Any] | None = None, *, id: str | None = None) -> LlmResponse:
    """A model response with a single function call."""
    return calls(call(name, args, id=id))


def model_text(*texts: str, thought: tuple[str, ...] = ()) -> LlmResponse:
    parts = [Part(text=t, thought=True) for t in thought] + [Part.from_text(t) for t in texts]
    return LlmResponse(content=Content(role="model", parts=parts), finish_reason="STOP")


def responses(event: Event) -> list[tuple[str, dict[str, Any]]]:
    """``(name, response)`` of each function response in ``event``."""
    return [(r.name, dict(r.response)) for r in event.get_function_responses()]


def kinds(events: Sequence[Event]) -> list[str]:
    """A compact picture of a run: ``FC:name``, ``FR:name``, ``T:text``, ``E:code``, ``-``."""
    out: list[str] = []
    for event in events:
        if event.get_function_calls():
            out.append("FC:" + ",".join(c.name for c in event.get_function_calls()))
        elif event.get_function_responses():
            out.append("FR:" + ",".join(r.name for r in event.get_function_responses()))
        elif event.error_code:
            out.append("E:" + event.error_code)
        elif event.text is not None:
            out.append("T:" + event.text)
        else:
            out.append("-")
    return out


def texts_of(content: Content) -> list[str]:
    return [p.text for p in content.parts if p.text is not None]


class Chat:
    """One session driven turn by turn; ``delivered`` keeps every event the consumer received."""

    def __init__(self, runner: Runner, session_id: str, user_id: str = "u") -> None:
        self.runner = runner
        self.session_id = session_id
        self.user_id = user_id
        self.delivered: list[Event] = []

    @classmethod
    async def start(
        cls,
        agent: BaseAgent,
        *,
        runner: Runner | None = None,
        state: Mapping[str, Any] | None = None,
        user_id: str = "u",
    ) -> Chat:
        runner = runner or InMemoryRunner(agent)
        session = await runner.session_service.create_session(
            app_name=runner.app_name, user_id=user_id, state=dict(state) if state else None
        )
        return cls(runner, session.id, user_id)

    async def send(
        self,
        message: Content | str = "hi",
        *,
        run_config: RunConfig | None = None,
        state_delta: Mapping[str, Any] | None = None,
    ) -> list[Event]:
        """Run one invocation; return the events this turn delivered (failures propagate)."""
        turn: list[Event] = []
        async with self.runner.run(
            user_id=self.user_id,
            session_id=self.session_id,
            new_message=message,
            run_config=run_config,
            state_delta=state_delta,
        ) as events:
            async for event in events:
                turn.append(event)
                self.delivered.append(event)
        return turn

    async def session(self) -> Session:
        """The session as stored (freshly loaded)."""
        session = await self.runner.session_service.get_session(
            app_name=self.runner.app_name, user_id=self.user_id, session_id=self.session_id
        )
        assert session is not None
        return session

    async def stored(self) -> list[Event]:
        """The stored events after the user events of this session."""
        return [e for e in (await self.session()).events if e.author != "user"]


async def chat(agent: BaseAgent, message: Content | str = "hi", **kwargs: Any) -> list[Event]:
    """One turn in a fresh session."""
    run_config = kwargs.pop("run_config", None)
    state_delta = kwargs.pop("state_delta", None)
    session = await Chat.start(agent, **kwargs)
    return await session.send(message, run_config=run_config, state_delta=state_delta)
