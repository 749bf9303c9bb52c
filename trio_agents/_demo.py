"""The built-in demo: ``python -m trio_agents demo``.

Two small applications, both deterministic and offline:

* ``workflow``: custom agents in a :class:`SequentialAgent` pipeline, with a
  :class:`ParallelAgent` fan-out that gathers facts concurrently, a :class:`LoopAgent` that
  refines a draft until a critic escalates, and a sign-off that pauses the pipeline until a
  human answers (the invocation then resumes where it stopped);
* ``assistant``: :class:`LlmAgent` s on a scripted model (no network): concurrent function tools,
  an :class:`AgentTool`, a transfer to a billing agent, and a refund tool that needs the user's
  confirmation (the run pauses; the approval resumes it and the refund runs).

Both apps are resumable (``ResumabilityConfig(is_resumable=True)``).

Each prints its event stream as a timeline (author, branch, text, function calls, state changes)
and the final session state.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TextIO

import trio

from ._app import App, ResumabilityConfig
from ._content import Content, Part
from ._context import InvocationContext
from ._events import Event, EventActions
from ._ids import new_function_call_id
from ._runner import Runner
from .agents import BaseAgent, LlmAgent, LoopAgent, ParallelAgent, SequentialAgent
from .agents._llm_contents import CONTEXT_PREAMBLE
from .artifacts import InMemoryArtifactService
from .memory import InMemoryMemoryService, MemoryService, SqliteMemoryService
from .models import LlmRequest, LlmResponse
from .sessions import InMemorySessionService, SessionService, SqliteSessionService
from .testing import ScriptedModel
from .tools import AgentTool, FunctionTool, ToolContext, preload_memory

__all__ = ["DEFAULT_DEMO_DB", "DEMOS", "assistant_app", "format_event", "run_demo", "workflow_app"]

USER = "demo-user"
DEFAULT_DEMO_DB = "trio_agents_demo.db"
"""Where ``python -m trio_agents demo`` keeps its sessions (``--db``; ``--in-memory``: none)."""
MODEL_ENV = "TRIO_AGENTS_DEMO_MODEL"
"""Environment variable naming a real model for the assistant demo (offline when unset)."""

# --------------------------------------------------------------------------- the timeline


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe_parts(event: Event) -> list[str]:
    lines: list[str] = []
    for part in event.content.parts if event.content else ():
        if part.text and not part.thought:
            lines.append(repr(part.text))
        if (call := part.function_call) is not None:
            args = ", ".join(f"{k}={_short(v, 30)}" for k, v in sorted(call.args.items()))
            lines.append(f"-> call {call.name}({args})")
        if (response := part.function_response) is not None:
            lines.append(f"<- {response.name}: {_short(dict(response.response))}")
    return lines


def _describe_actions(event: Event) -> list[str]:
    actions = event.actions
    lines = [f"state {key} = {_short(value)}" for key, value in actions.state_delta.items()]
    if actions.transfer_to_agent:
        lines.append(f"transfer to {actions.transfer_to_agent}")
    if actions.escalate:
        lines.append("escalate")
    if event.long_running_tool_ids:
        lines.append("waiting for an answer (long-running tool)")
    if actions.agent_state is not None:
        sub = actions.agent_state.get("current_sub_agent")
        lines.append(f"checkpoint: running {sub}" if sub else "checkpoint: started")
    if actions.end_of_agent:
        lines.append("checkpoint: finished")
    if event.error_code:
        lines.append(f"error {event.error_code}: {event.error_message}")
    return lines


def format_event(index: int, event: Event) -> str:
    """One timeline entry: a ``number  author  [branch]`` line, then what the event carries."""
    head = f"{index:>3}  {event.author}" + (f"  [{event.branch}]" if event.branch else "")
    details = _describe_parts(event) + _describe_actions(event)
    return "\n".join([head, *(f"       {line}" for line in details)])


def describe_message(message: Content | str) -> str:
    """A user message as the timeline shows it: its text, or the function responses it carries."""
    if isinstance(message, str):
        return message
    answers = [
        f"{p.function_response.name} -> {_short(dict(p.function_response.response))}"
        for p in message.parts
        if p.function_response is not None
    ]
    return message.text or f"(function response: {'; '.join(answers)})"


async def _turn(
    runner: Runner, session_id: str, message: Content | str, out: TextIO, counter: list[int]
) -> list[Event]:
    """One turn; ``counter`` is the number of stored events, so numbers go on across turns."""
    print(f"\n> user: {describe_message(message)}", file=out)
    counter[0] += 1  # the user's message is stored too
    events: list[Event] = []
    async with runner.run(user_id=USER, session_id=session_id, new_message=message) as stream:
        async for event in stream:
            if not event.partial:
                counter[0] += 1
            events.append(event)
            print(format_event(counter[0], event), file=out)
    return events


@contextlib.asynccontextmanager
async def _demo_runner(
    agent: BaseAgent, app_name: str, db: str | None, out: TextIO
) -> AsyncIterator[tuple[Runner, list[int]]]:
    """A Runner on a SQLite file (or in memory), and how many events the session ``demo`` holds.

    The session is continued when stored. Memory lives beside the sessions (``<db>-memory``); the
    session is filed in it at the end, so the next run can search it.
    """
    service: SessionService = SqliteSessionService(db) if db else InMemorySessionService()
    memory: MemoryService = SqliteMemoryService(f"{db}-memory") if db else InMemoryMemoryService()
    resumable = ResumabilityConfig(is_resumable=True)
    runner = Runner(
        app=App(app_name, agent, resumability_config=resumable),
        session_service=service,
        artifact_service=InMemoryArtifactService(),
        memory_service=memory,
    )
    try:
        async with runner:
            stored_before = await _open_session(service, memory, app_name, db, out)
            yield runner, [stored_before]
            stored = await service.get_session(app_name=app_name, user_id=USER, session_id="demo")
            assert stored is not None
            await memory.add_session_to_memory(stored)
    finally:
        with trio.CancelScope(shield=True):
            await memory.aclose()
            close = getattr(service, "aclose", None)
            if close is not None:
                await close()


async def _open_session(
    service: SessionService, memory: MemoryService, app_name: str, db: str | None, out: TextIO
) -> int:
    """Create or continue the session ``demo``; say what it holds; return its event count."""
    session = await service.get_session(app_name=app_name, user_id=USER, session_id="demo")
    if session is None:
        await service.create_session(app_name=app_name, user_id=USER, session_id="demo")
        print(f"   new session 'demo'{f' in {db}' if db else ''}", file=out)
        return 0
    user_state = {k: v for k, v in session.state.items() if k.startswith("user:")}
    shown = _short(user_state, 100) if user_state else "none"
    print(
        f"   continuing session 'demo' in {db}: {len(session.events)} events stored "
        f"(numbering goes on from there); user: state {shown}",
        file=out,
    )
    found = await memory.search_memory(app_name=app_name, user_id=USER, query="refund")
    said = list(dict.fromkeys((e.author, e.content.text) for e in found.memories))[:2]
    if said:
        print('   memory (past sessions filed in memory; a search for "refund"):', file=out)
    for author, text in said:
        print(f"   memory: {author} said {_short(text, 100)}", file=out)
    return len(session.events)


async def _print_state(runner: Runner, session_id: str, out: TextIO) -> None:
    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id=USER, session_id=session_id
    )
    assert session is not None
    print("\nfinal state:", file=out)
    for key, value in sorted(session.state.items()):
        print(f"  {key} = {_short(value, 100)}", file=out)
    print(f"stored events: {len(session.events)}", file=out)


# --------------------------------------------------------------------------- the workflow demo


class Gatherer(BaseAgent):
    """Looks something up (simulated with a sleep) and records the fact in state."""

    topic: str = ""
    fact: str = ""
    latency: float = 0.0

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await trio.sleep(self.latency)
        await ctx.emit(
            Event(
                content=Content.from_text(f"{self.topic}: {self.fact}", role="model"),
                actions=EventActions(state_delta={f"fact:{self.topic}": self.fact}),
            )
        )


class Drafter(BaseAgent):
    """Writes a draft from the gathered facts, taking the critic's notes into account."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        state = ctx.session.state
        facts = sorted(key for key in state if key.startswith("fact:"))
        notes = list(state.get("notes", []))
        version = int(state.get("draft_version", 0)) + 1
        draft = f"Briefing v{version}: " + "; ".join(state[k] for k in facts)
        if notes:
            draft += " (" + ", ".join(notes) + ")"
        await ctx.emit(
            Event(
                content=Content.from_text(draft, role="model"),
                actions=EventActions(state_delta={"draft": draft, "draft_version": version}),
            )
        )


class Critic(BaseAgent):
    """Asks for one more improvement per pass; escalates once the draft is good enough."""

    wishes: tuple[str, ...] = ()

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        notes = list(ctx.session.state.get("notes", []))
        if len(notes) >= len(self.wishes):
            text, actions = "Good enough, ship it.", EventActions(escalate=True)
        else:
            wish = self.wishes[len(notes)]
            text, actions = f"Please {wish}.", EventActions(state_delta={"notes": [*notes, wish]})
        await ctx.emit(Event(content=Content.from_text(text, role="model"), actions=actions))


class SignOff(BaseAgent):
    """Asks a human to sign the draft off: the pipeline pauses until the answer comes.

    The request is a long-running call; the human's answer (a function response to its id)
    resumes the invocation, and this agent then records the verdict.
    """

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        verdict = _answer_to(ctx, "sign_off")
        if verdict is None:
            draft = ctx.session.state.get("draft", "")
            call_id = new_function_call_id()
            call = Part.from_function_call("sign_off", {"draft": draft}, id=call_id)
            content = Content(role="model", parts=[call])
            await ctx.emit(Event(content=content, long_running_tool_ids={call_id}))
            return
        approved = bool(verdict.get("approved"))
        text = f"Signed off by {verdict.get('by', 'a human')}." if approved else "Sign-off refused."
        await ctx.emit(
            Event(
                content=Content.from_text(text, role="model"),
                actions=EventActions(state_delta={"signed_off": approved}),
            )
        )


def _answer_to(ctx: InvocationContext, name: str) -> Mapping[str, Any] | None:
    """The user's answer to this invocation's call ``name``, if there is one."""
    for event in reversed(ctx.session.events):
        if event.invocation_id != ctx.invocation_id:
            return None
        if event.author == "user":
            for response in event.get_function_responses():
                if response.name == name:
                    return response.response
    return None


class Publisher(BaseAgent):
    """Publishes the final draft."""

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        draft = ctx.session.state.get("draft", "")
        await ctx.emit(
            Event(
                content=Content.from_text(f"Published: {draft}", role="model"),
                actions=EventActions(state_delta={"published": True}),
            )
        )


def workflow_app() -> SequentialAgent:
    """gather (parallel fan-out) → refine (loop until the critic escalates) → sign-off (a human
    answers; the pipeline pauses until then) → publish."""
    gather = ParallelAgent(
        name="gather",
        description="Looks up facts concurrently.",
        sub_agents=[
            Gatherer(name="weather", topic="weather", fact="sunny, 21C", latency=0.03),
            Gatherer(name="news", topic="news", fact="trio 0.32 released", latency=0.01),
            Gatherer(name="markets", topic="markets", fact="calm", latency=0.02),
        ],
    )
    refine = LoopAgent(
        name="refine",
        max_iterations=5,
        sub_agents=[
            Drafter(name="drafter"),
            Critic(name="critic", wishes=("add a headline", "cite sources")),
        ],
    )
    return SequentialAgent(
        name="pipeline",
        description="Builds and publishes a briefing, once a human signs it off.",
        sub_agents=[gather, refine, SignOff(name="sign_off"), Publisher(name="publisher")],
    )


# --------------------------------------------------------------------------- the assistant demo


def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Return the current weather for a city.

    Args:
        city: The city to look up.
    """
    tool_context.state["user:last_city"] = city  # remembered across sessions and runs
    return {"city": city, "forecast": "sunny", "celsius": 21}


def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def issue_refund(amount: float, tool_context: ToolContext) -> dict[str, Any]:
    """Refund the customer. A human must approve each refund first.

    Args:
        amount: The amount to refund, in euros.
    """
    confirmation = tool_context.tool_confirmation
    approver = confirmation.payload if confirmation is not None else None
    return {"refunded": amount, "approved_by": approver or "a human"}


def _call(*calls: tuple[str, Mapping[str, Any]]) -> LlmResponse:
    parts = [Part.from_function_call(name, dict(args)) for name, args in calls]
    return LlmResponse(content=Content(role="model", parts=parts))


def _responses(request: LlmRequest) -> dict[str, Any]:
    last = request.contents[-1] if request.contents else None
    parts = last.parts if last is not None and last.role == "user" else ()
    return {
        p.function_response.name: p.function_response.response for p in parts if p.function_response
    }


def _latest_user_text(request: LlmRequest) -> str:
    """What the user said last (not other agents' turns retold as context)."""
    for content in reversed(request.contents):
        text = content.text if content.role == "user" else None
        if text and not text.startswith(CONTEXT_PREAMBLE):
            return text
    return ""


def _user_text(request: LlmRequest) -> str:
    return " ".join(c.text or "" for c in request.contents if c.role == "user")


def _concierge(request: LlmRequest) -> LlmResponse | str:
    answers = _responses(request)
    if answers:
        weather, product = answers["get_weather"], answers["calculator"]["result"]
        return f"It is {weather['forecast']} in {weather['city']}; the calculator says {product}."
    latest = _latest_user_text(request)
    if "refund" in latest:
        return _call(("transfer_to_agent", {"agent_name": "billing"}))
    numbers = re.findall(r"\d+", latest)
    return _call(
        ("get_weather", {"city": "Paris"}),
        ("calculator", {"request": " times ".join(numbers)}),
    )


def _calculator(request: LlmRequest) -> LlmResponse | str:
    answers = _responses(request)
    if answers:
        return f"{answers['multiply']['result']:g}"
    a, b = (float(n) for n in re.findall(r"\d+", _user_text(request))[:2])
    return _call(("multiply", {"a": a, "b": b}))


def _billing(request: LlmRequest) -> LlmResponse | str:
    answers = _responses(request)
    if "issue_refund" in answers:
        done = answers["issue_refund"]
        return "Refund issued." if "refunded" in done else "Refund declined."
    amounts = re.findall(r"refund of (\d+)", _latest_user_text(request))
    if not amounts:  # not a refund: hand the conversation back
        return _call(("transfer_to_agent", {"agent_name": "concierge"}))
    return _call(("issue_refund", {"amount": float(amounts[-1])}))


def assistant_app(model: str | None = None) -> LlmAgent:
    """A concierge with tools, an agent tool, and a billing agent it can transfer to.

    ``model`` names a real model for every agent (e.g. ``"gemini-2.5-flash"``,
    ``"openai/gpt-4o-mini"``); by default each agent runs on its offline scripted model.
    """

    def pick(handler: Callable[[LlmRequest], LlmResponse | str], name: str) -> Any:
        return model or ScriptedModel(handler, model=f"demo-{name}")

    calculator = LlmAgent(
        name="calculator",
        description="Does arithmetic: give it the whole question as the request.",
        model=pick(_calculator, "calculator"),
        instruction="Compute what is asked using the multiply tool; answer with the number only.",
        tools=[FunctionTool(multiply)],
    )
    billing = LlmAgent(
        name="billing",
        description="Handles refunds; a human approves each one.",
        model=pick(_billing, "billing"),
        instruction=(
            "Handle refunds: call issue_refund with the amount (a human approves it first), "
            "then report the outcome in one sentence."
        ),
        tools=[FunctionTool(issue_refund, require_confirmation=True)],
    )
    return LlmAgent(
        name="concierge",
        description="Answers questions and routes billing issues.",
        model=pick(_concierge, "concierge"),
        instruction=(
            "Help the user. Use get_weather for weather and the calculator tool for arithmetic, "
            "calling both at once when both are asked. Transfer refund requests to billing. "
            "The user last asked about the city: {user:last_city?}."
        ),
        tools=[FunctionTool(get_weather), AgentTool(calculator), preload_memory],
        sub_agents=[billing],
        output_key="last_answer",
    )


# --------------------------------------------------------------------------- running


def _waiting_calls(events: list[Event]) -> list[Any]:
    """The calls of ``events`` that wait for the human (long-running calls, confirmations)."""
    return [
        c for e in events for c in e.get_function_calls() if c.id in (e.long_running_tool_ids or ())
    ]


async def _run_workflow(out: TextIO, db: str | None = None) -> None:
    print(
        "== workflow: gather (parallel) -> refine (loop) -> sign-off (pauses for a human) "
        "-> publish",
        file=out,
    )
    async with _demo_runner(workflow_app(), "demo-workflow", db, out) as (runner, counter):
        events = await _turn(runner, "demo", "Prepare today's briefing.", out, counter)
        for call in _waiting_calls(events):
            print("\n(the pipeline paused; an editor signs the draft off)", file=out)
            answer = Part.from_function_response(
                call.name, {"approved": True, "by": "the editor"}, id=call.id
            )
            await _turn(runner, "demo", Content(role="user", parts=[answer]), out, counter)
        await _print_state(runner, "demo", out)


async def _run_assistant(out: TextIO, db: str | None = None) -> None:
    model = os.environ.get(MODEL_ENV) or None
    print("== assistant: tools, AgentTool, transfer, a refund that needs approval", file=out)
    offline = f"offline scripted model (set {MODEL_ENV} for a real one)"
    print(f"   model: {model or offline}", file=out)
    app = assistant_app(model)
    async with _demo_runner(app, "demo-assistant", db, out) as (runner, counter):
        session_id = "demo"
        await _turn(runner, session_id, "Weather in Paris, and what is 6 times 7?", out, counter)
        events = await _turn(runner, session_id, "I'd like a refund of 30 euros.", out, counter)
        waiting = _waiting_calls(events)
        if not waiting:
            print("\n(the model did not ask for an approval)", file=out)
        else:
            answer = Part.from_function_response(
                waiting[-1].name, {"confirmed": True, "payload": "Ana"}, id=waiting[-1].id
            )
            print("\n(the run paused; a human approves the refund)", file=out)
            await _turn(runner, session_id, Content(role="user", parts=[answer]), out, counter)
        await _print_state(runner, session_id, out)


DEMOS: dict[str, Callable[[TextIO, str | None], Any]] = {
    "workflow": _run_workflow,
    "assistant": _run_assistant,
}


async def run_demo(names: list[str], out: TextIO, db: str | None = None) -> None:
    """Run the named demos (see :data:`DEMOS`) one after the other, printing to ``out``.

    With ``db`` (a SQLite file) the sessions persist: running again continues them.
    """
    for i, name in enumerate(names):
        if i:
            print(file=out)
        await DEMOS[name](out, db)
