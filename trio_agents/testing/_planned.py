"""LLM agents for random applications: a scripted model that follows a plan of turns.

Each fresh turn of an agent (a model call that does not answer the agent's own tool results)
takes the next :class:`Turn` of its plan; after the plan, the agent answers with text. A turn
that ran tools is followed by a model call that answers ``"done"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, get_args

import attrs
import trio

from .._content import Content, Part
from ..agents._llm import LlmAgent
from ..models._base import LlmRequest, LlmResponse
from ..tools._base import ToolContext
from ..tools._exit_loop import exit_loop
from ..tools._function import FunctionTool
from ._agents import InjectedError
from ._scripted import Entry, ScriptedModel

__all__ = ["PlannedModel", "Turn", "fuzz_tool", "planned_agent"]

TurnKind: TypeAlias = Literal["text", "tools", "exit_loop", "transfer", "fail", "tool_fail"]
TURN_KINDS: tuple[str, ...] = get_args(TurnKind)
FUZZ_TOOL = "fuzz_tool"
FOLLOW_UP = "done"


@attrs.frozen
class Turn:
    """One fresh turn of a planned LLM agent.

    * ``text``: a final text answer, streamed in ``chunks`` pieces under SSE;
    * ``tools``: ``calls`` concurrent calls of :data:`fuzz_tool`, each sleeping ``seconds``;
      the next model call answers ``"done"``;
    * ``exit_loop``: a call of the ``exit_loop`` tool (escalates);
    * ``transfer``: a call of ``transfer_to_agent`` handing off to ``target``;
    * ``fail``: the model call raises :class:`~trio_agents.testing.InjectedError`;
    * ``tool_fail``: one :data:`fuzz_tool` call that raises after ``seconds``.
    """

    kind: TurnKind
    calls: int = 1
    seconds: float = 0.0
    target: str = ""
    chunks: int = 1

    def __attrs_post_init__(self) -> None:
        if self.kind not in TURN_KINDS:
            raise ValueError(f"unknown turn kind {self.kind!r}; kinds are {TURN_KINDS}")
        if self.kind == "transfer" and not self.target:
            raise ValueError("a transfer turn needs a target")
        if self.calls < 1 or self.chunks < 1:
            raise ValueError("a turn needs at least one call and one chunk")

    def __repr__(self) -> str:
        if self.kind == "text":
            return f"text[{self.chunks}]" if self.chunks > 1 else "text"
        if self.kind == "tools":
            return f"tools[{self.calls}x{self.seconds:g}s]"
        if self.kind == "transfer":
            return f"transfer[{self.target}]"
        if self.kind == "tool_fail":
            return f"tool_fail[{self.seconds:g}s]"
        return self.kind


async def _fuzz_tool(index: int, seconds: float, fail: bool, tool_context: ToolContext) -> dict:  # type: ignore[type-arg]
    """A tool for fuzzing: sleeps ``seconds``, then answers (or fails when ``fail``).

    Args:
        index: The call's position in its turn.
        seconds: How long the call takes.
        fail: Whether the call raises.
    """
    if seconds > 0:
        await trio.sleep(seconds)
    else:
        await trio.lowlevel.checkpoint()
    if fail:
        agent = tool_context.agent_name
        raise InjectedError(f"{FUZZ_TOOL} call {index} of {agent} failed", agent=agent)
    return {"index": index}


fuzz_tool = FunctionTool(_fuzz_tool, name=FUZZ_TOOL)
"""The tool planned agents call: sleeps, then answers ``{"index": i}`` (or raises)."""


def _calls(*parts: Part) -> LlmResponse:
    return LlmResponse(content=Content(role="model", parts=list(parts)))


def _answers_own_tools(request: LlmRequest) -> bool:
    """Whether the request ends with this agent's :data:`fuzz_tool` results."""
    if len(request.contents) < 2:
        return False
    last, before = request.contents[-1], request.contents[-2]
    answers = [p.function_response for p in last.parts if p.function_response is not None]
    calls = [p.function_call for p in before.parts if p.function_call is not None]
    return (
        before.role == "model"
        and bool(answers)
        and all(a.name == FUZZ_TOOL for a in answers)
        and bool(calls)
        and all(c.name == FUZZ_TOOL for c in calls)
    )


class PlannedModel(ScriptedModel):
    """A :class:`ScriptedModel` whose answers follow a plan of :class:`Turn` s."""

    def __init__(self, agent_name: str, plan: Sequence[Turn]) -> None:
        super().__init__(self._answer, model=f"planned-{agent_name}")
        self.agent_name = agent_name
        self.plan = tuple(plan)
        self.turns_started = 0

    def reset(self) -> None:
        """Start the plan over and forget the requests seen."""
        self.turns_started = 0
        self.requests.clear()

    def _answer(self, request: LlmRequest) -> Entry:
        if _answers_own_tools(request):
            return FOLLOW_UP
        index = self.turns_started
        self.turns_started += 1
        turn = self.plan[index] if index < len(self.plan) else Turn("text")
        return _entry(self.agent_name, index, turn)


def _entry(agent: str, index: int, turn: Turn) -> Entry:
    if turn.kind == "text":
        pieces = [f"{agent} turn {index} piece {i}" for i in range(turn.chunks - 1)]
        return [*pieces, f"{agent} turn {index}"]
    if turn.kind == "tools":
        args: dict[str, Any] = {"seconds": turn.seconds, "fail": False}
        return _calls(
            *(Part.from_function_call(FUZZ_TOOL, {"index": i, **args}) for i in range(turn.calls))
        )
    if turn.kind == "tool_fail":
        return _calls(
            Part.from_function_call(FUZZ_TOOL, {"index": 0, "seconds": turn.seconds, "fail": True})
        )
    if turn.kind == "exit_loop":
        return _calls(Part.from_function_call("exit_loop", {}))
    if turn.kind == "transfer":
        return _calls(Part.from_function_call("transfer_to_agent", {"agent_name": turn.target}))
    return InjectedError(f"the model of {agent} failed on turn {index}", agent=agent)


def planned_agent(name: str, plan: Sequence[Turn], sub_agents: Sequence[LlmAgent] = ()) -> LlmAgent:
    """An :class:`~trio_agents.LlmAgent` driven by a :class:`PlannedModel`."""
    return LlmAgent(
        name=name,
        model=PlannedModel(name, plan),
        tools=[fuzz_tool, exit_loop],
        sub_agents=list(sub_agents),
    )
