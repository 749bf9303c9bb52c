"""AgentTool: call an agent like a function (R-AT-1..9).

Each call is a child run nested in the tool call's task, so cancelling the parent cancels it: a
fresh in-memory session seeded with the parent's state, artifacts forwarded to the parent
session, the parent's plugins. The child's state and artifact changes flow back into the
parent's function-response event; the child's events are neither delivered to the parent's
consumer nor stored in the parent session.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from .._content import Content, Part
from .._errors import ConfigurationError
from .._events import Event
from ..artifacts._base import ArtifactService
from ..models._base import FunctionDeclaration
from ._base import BaseTool, ToolContext
from ._schema import json_schema

if TYPE_CHECKING:
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
            return json.dumps(data)
        request = args.get("request")
        return request if isinstance(request, str) else json.dumps(args)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        if self.skip_summarization:
            tool_context.actions.skip_summarization = True
        last, pending = await self._run_child(self._input_text(args), tool_context)
        if pending:  # R-AT-7: the child session is discarded, so nothing could answer these
            tool_context.actions.skip_summarization = None
            return {
                "result": f"Error: agent {self.agent.name!r} stopped waiting on unresolved "
                f"long-running tool call(s) (pending call ids: {sorted(pending)}), which "
                "AgentTool cannot resume."
            }
        return self._result(last)

    async def _run_child(
        self, text: str, tool_context: ToolContext
    ) -> tuple[Event | None, set[str]]:
        """Run the child; return its last event with content (or an error) and the ids of the
        long-running calls it left unanswered."""
        from .._runner import Runner, StreamingMode
        from ..sessions._memory import InMemorySessionService

        ctx = tool_context.invocation_context
        parent = ctx.session
        runner = Runner(
            agent=self.agent,
            app_name=parent.app_name,
            session_service=InMemorySessionService(),
            artifact_service=_ForwardingArtifacts(tool_context),
            memory_service=ctx.memory_service,
            plugins=ctx.plugin_manager.plugins if self.include_plugins else (),
        )
        state = {k: v for k, v in parent.state.items() if not k.startswith("_adk")}
        session = await runner.session_service.create_session(
            app_name=parent.app_name, user_id=parent.user_id, state=state
        )
        # The parent's settings, unstreamed: only the last event's content is used (R-AT-3).
        config = attrs.evolve(ctx.run_config, streaming_mode=StreamingMode.NONE)
        last: Event | None = None
        pending: set[str] = set()
        async with runner.run(
            user_id=parent.user_id,
            session_id=session.id,
            new_message=Content(role="user", parts=[Part(text=text)]),
            run_config=config,
        ) as events:
            async for event in events:
                if event.actions.state_delta:
                    tool_context.state.update(event.actions.state_delta)  # R-AT-5
                if event.content is not None or event.error_message:
                    last = event
                pending |= event.long_running_tool_ids or set()
                pending -= {r.id for r in event.get_function_responses() if r.id}
        return last, pending

    def _result(self, last: Event | None) -> Any:
        from ..agents._output import validate_output

        if last is None:
            return {"result": ""}
        if last.content is None:
            return {"result": last.error_message or ""}
        text = "\n".join(p.text for p in last.content.parts if p.text is not None and not p.thought)
        schema = self._schema("output_schema")
        if schema is not None and text.strip():
            return validate_output(schema, json.loads(text), where=f"agent tool {self.name!r}")
        return {"result": text}


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
        self, *, app_name: str, user_id: str, session_id: str, filename: str, artifact: Part
    ) -> int:
        return await self.tool_context.save_artifact(filename, artifact)

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        filename: str,
        version: int | None = None,
    ) -> Part | None:
        return await self.tool_context.load_artifact(filename, version)

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str
    ) -> list[str]:
        return await self.tool_context.list_artifacts()

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> None:
        service, ids = self._parent()
        await service.delete_artifact(filename=filename, **ids)

    async def list_versions(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> list[int]:
        service, ids = self._parent()
        return await service.list_versions(filename=filename, **ids)
