"""AgentTool: call an agent like a function (R-AT-1..9).

Each call is a child run nested in the tool call's task, so cancelling the parent cancels it: a
fresh in-memory session seeded with the parent's state, artifacts forwarded to the parent
session, the parent's plugins. The child's state and artifact changes flow back into the
parent's function-response event; the child's events are neither delivered to the parent's
consumer nor stored in the parent session. A child that stops waiting for the client pauses the
parent: its open calls are stored in the parent session and answered there by their ids, and the
answer continues the child (:mod:`trio_agents.tools._child_pause`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .._content import Content, Part
from .._errors import ConfigurationError
from .._events import Event
from ..artifacts._base import ArtifactService, ArtifactVersion
from ..models._base import FunctionDeclaration
from ._base import BaseTool, ToolContext
from ._child_pause import ChildPause
from ._schema import is_pydantic_model, json_schema

if TYPE_CHECKING:
    from .._run_stream import RunStream
    from .._runner import Runner
    from ..agents._base import BaseAgent

__all__ = ["AgentTool"]


class AgentTool(BaseTool):
    """Wraps ``agent`` as a tool. ``skip_summarization`` makes its answer the final response."""

    def __init__(
        self,
        agent: BaseAgent,
        *,
        skip_summarization: bool = False,
        include_plugins: bool = True,
        timeout: float | None = None,
    ) -> None:
        super().__init__(name=agent.name, description=agent.description, timeout=timeout)
        self.agent = agent
        self.skip_summarization = skip_summarization
        self.include_plugins = include_plugins

    def _schema(self, field: str) -> Any:
        agent: Any = self.agent
        schema = getattr(agent, field, None)
        if schema is None and agent.sub_agents:
            schema = getattr(agent.sub_agents[0], field, None)
        return schema

    def declaration(self) -> FunctionDeclaration:
        schema = self._schema("input_schema")
        if schema is None:
            parameters: dict[str, Any] = {
                "type": "object",
                "properties": {"request": {"type": "string"}},
                "required": ["request"],
            }
        elif isinstance(schema, type):
            parameters = json_schema(schema, where=f"agent tool {self.name!r} input_schema")
        else:
            parameters = dict(schema)
        return FunctionDeclaration(
            name=self.name, description=self.description, parameters=parameters
        )

    def _input_text(self, args: dict[str, Any]) -> str:
        from ..agents._output import validate_output

        schema = self._schema("input_schema")
        if schema is not None:
            data = validate_output(schema, args, where=f"agent tool {self.name!r} input")
            if is_pydantic_model(schema):  # as pydantic writes it: compact, unescaped
                return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
            return json.dumps(data)
        request = args.get("request")
        return request if isinstance(request, str) else json.dumps(args)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        if self.skip_summarization:
            tool_context.actions.skip_summarization = True
        resume = tool_context.resume_child
        if resume is None:
            child = await self._new_child(tool_context)
            message: Content | None = Content(
                role="user", parts=[Part(text=self._input_text(args))]
            )
        else:
            child = await self._paused_child(tool_context, resume.pause)
            message = resume.answers
        last = await child.run(message, None if resume is None else resume.pause.invocation_id)
        if child.pending:
            # The parent pauses too: the child's open calls go to the client (a waiting event).
            tool_context.actions.skip_summarization = None
            call_id = tool_context.function_call_id or ""
            pause = ChildPause.of(call_id, self.name, child.state, child.events(), child.pending)
            tool_context.paused_child = pause
            return {"status": "pending", "waiting_for": [c.id for c in pause.waiting]}
        return self._result(last)

    async def _new_child(self, tool_context: ToolContext) -> _Child:
        ctx = tool_context.invocation_context
        parent = ctx.session
        state = {k: v for k, v in parent.state.items() if not k.startswith("_adk")}
        child = _Child(self._runner(tool_context), tool_context, state)
        await child.create()
        return child

    async def _paused_child(self, tool_context: ToolContext, pause: ChildPause) -> _Child:
        child = _Child(self._runner(tool_context), tool_context, dict(pause.state))
        await child.create(pause.child_events())
        return child

    def _runner(self, tool_context: ToolContext) -> Runner:
        from .._runner import Runner
        from ..sessions._memory import InMemorySessionService

        ctx = tool_context.invocation_context
        runner = Runner(
            agent=self.agent,
            app_name=ctx.session.app_name,
            session_service=InMemorySessionService(),
            artifact_service=_ForwardingArtifacts(tool_context),
            memory_service=ctx.memory_service,
            plugins=ctx.plugin_manager.plugins if self.include_plugins else (),
        )
        runner.resumable = ctx.is_resumable  # the child pauses and resumes as the parent does
        return runner

    def _result(self, last: Event | None) -> Any:
        from ..agents._output import parse_json_answer, validate_output

        if last is None:
            return ""
        if last.content is None:
            return last.error_message or ""
        text = "\n".join(p.text for p in last.content.parts if p.text and not p.thought)
        if not text and last.error_message:
            return last.error_message
        schema = self._schema("output_schema")
        if schema is not None and text.strip():
            data = parse_json_answer(text)
            return validate_output(schema, data, where=f"agent tool {self.name!r}")
        return text  # a string, as ADK's agent tool answers (the model sees {"result": text})


class _Child:
    """One child run of an agent tool: its own in-memory session, the parent's settings."""

    def __init__(self, runner: Runner, tool_context: ToolContext, state: dict[str, Any]) -> None:
        self.runner = runner
        self.tool_context = tool_context
        self.state = state
        self.session_id = ""
        self.stream: RunStream | None = None
        self.pending: set[str] = set()
        """The child's long-running calls that nothing has answered (not even its tool)."""

    async def create(self, events: list[Event] | None = None) -> None:
        """Create the child session (with the events of a paused child run, if any)."""
        parent = self.tool_context.invocation_context.session
        service = self.runner.session_service
        session = await service.create_session(
            app_name=parent.app_name, user_id=parent.user_id, state=self.state
        )
        for event in events or ():
            await service.append_event(session, event)
        self.session_id = session.id

    async def run(self, message: Content | None, invocation_id: str | None) -> Event | None:
        """Run (or resume) the child; return its last event with content (or an error)."""
        from .._runner import StreamingMode

        ctx = self.tool_context.invocation_context
        # The parent's settings, unstreamed: only the last event's content is used (R-AT-3).
        config = attrs.evolve(ctx.run_config, streaming_mode=StreamingMode.NONE)
        last: Event | None = None
        async with self.runner.run(
            user_id=ctx.session.user_id,
            session_id=self.session_id,
            new_message=message,
            run_config=config,
            invocation_id=invocation_id if self.runner.resumable else None,
        ) as events:
            self.stream = events
            async for event in events:
                if event.actions.state_delta:
                    self.tool_context.state.update(event.actions.state_delta)  # R-AT-5
                if event.content is not None or event.error_message:
                    last = event
                self.pending |= event.long_running_tool_ids or set()
                self.pending -= {r.id for r in event.get_function_responses() if r.id}
        return last

    def events(self) -> list[Event]:
        assert self.stream is not None
        return list(self.stream.session.events)


@attrs.define
class _ForwardingArtifacts(ArtifactService):
    """The child's artifact service: everything lands in the parent session (R-AT-6)."""

    tool_context: ToolContext

    def _parent(self) -> tuple[ArtifactService, dict[str, str]]:
        ctx = self.tool_context.invocation_context
        session = ctx.session
        ids = {"app_name": session.app_name, "user_id": session.user_id, "session_id": session.id}
        service: Any = ctx.artifact_service  # typed on the context once the runner types it
        if service is None:
            raise ConfigurationError("Artifact service is not initialized.")
        return service, ids

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: Part,
        session_id: str | None = None,
        custom_metadata: Mapping[str, Any] | None = None,
    ) -> int:
        return await self.tool_context.save_artifact(filename, artifact, custom_metadata)

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> Part | None:
        return await self.tool_context.load_artifact(filename, version)

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        return await self.tool_context.list_artifacts()

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        service, ids = self._parent()
        await service.delete_artifact(filename=filename, **ids)

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        service, ids = self._parent()
        return await service.list_versions(filename=filename, **ids)

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        service, ids = self._parent()
        return await service.list_artifact_versions(filename=filename, **ids)
