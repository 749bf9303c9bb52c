"""LlmAgent: an agent whose turns are driven by a language model and its tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

from .._callbacks import Callback, CallbackSpec, callback_chain
from .._context import CallbackContext, InvocationContext, ReadonlyContext
from .._errors import ConfigurationError
from .._events import Event
from ..models._base import Model, resolve_model
from ..tools._base import BaseTool
from ..tools._function import FunctionTool
from ..tools._set_model_response import SetModelResponseTool
from ..tools._toolset import BaseToolset
from ._base import BaseAgent
from ._llm_toolsets import step_tools_of

__all__ = ["Agent", "InstructionProvider", "LlmAgent"]

InstructionProvider = Callable[[ReadonlyContext], "str | Awaitable[str]"]
ToolSpec = BaseTool | BaseToolset | Callable[..., Any]
_FORBIDDEN_CONFIG = ("tools", "system_instruction", "response_schema")

_MODEL_CALLBACKS = {
    "before_model_callback": ("callback_context", "llm_request"),
    "after_model_callback": ("callback_context", "llm_response"),
    "on_model_error_callback": ("callback_context", "llm_request", "error"),
    "before_tool_callback": ("tool", "args", "tool_context"),
    "after_tool_callback": ("tool", "args", "tool_context", "tool_response"),
    "on_tool_error_callback": ("tool", "args", "tool_context", "error"),
}


class _CallbackField:
    """One of an LLM agent's model or tool callbacks: read back as given, and settable after
    construction as an ADK field is (the chain the flow runs is rebuilt and checked)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = name

    def __get__(self, agent: LlmAgent | None, owner: type | None = None) -> Any:
        return self if agent is None else agent._callback_specs[self.field]

    def __set__(self, agent: LlmAgent, value: CallbackSpec) -> None:
        params = _MODEL_CALLBACKS[self.field]
        owner = f"agent {agent.name!r}"
        agent.callbacks[self.field] = callback_chain(
            value, owner=owner, field=self.field, params=params
        )
        agent._callback_specs[self.field] = value


class LlmAgent(BaseAgent):
    """An agent that calls a model in a loop of steps, running the tools the model asks for.

    Fields follow ADK: ``model`` (a :class:`~trio_agents.models.Model` or a registered name;
    empty inherits from the nearest LLM ancestor, R-LLM-9), ``instruction`` (a template, R-TPL, or
    a provider callable that bypasses substitution), ``global_instruction`` (deprecated in ADK:
    the root agent's applies to every LLM agent of the tree, before the agent's own instruction),
    ``tools`` (functions, tools or toolsets, whose tools are asked for at every model step),
    ``output_key``, ``output_schema`` / ``input_schema`` (pydantic
    models, attrs classes, dataclasses or JSON schema dicts), ``include_contents`` (``"default"`` or
    ``"none"``), the transfer flags, ``generate_content_config`` and the model/tool callbacks
    (callable or list, sync or async).
    """

    default_model: ClassVar[Model | str | None] = None

    before_model_callback = _CallbackField()
    after_model_callback = _CallbackField()
    on_model_error_callback = _CallbackField()
    before_tool_callback = _CallbackField()
    after_tool_callback = _CallbackField()
    on_tool_error_callback = _CallbackField()

    def __init__(
        self,
        *,
        name: str,
        model: Model | str = "",
        instruction: str | InstructionProvider = "",
        global_instruction: str | InstructionProvider = "",
        description: str = "",
        tools: Sequence[ToolSpec] = (),
        output_key: str | None = None,
        output_schema: type | Mapping[str, Any] | None = None,
        input_schema: type | Mapping[str, Any] | None = None,
        include_contents: Literal["default", "none"] = "default",
        disallow_transfer_to_parent: bool = False,
        disallow_transfer_to_peers: bool = False,
        generate_content_config: Mapping[str, Any] | None = None,
        before_model_callback: CallbackSpec = None,
        after_model_callback: CallbackSpec = None,
        on_model_error_callback: CallbackSpec = None,
        before_tool_callback: CallbackSpec = None,
        after_tool_callback: CallbackSpec = None,
        on_tool_error_callback: CallbackSpec = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, description=description, **kwargs)
        if include_contents not in ("default", "none"):
            raise ConfigurationError(
                f"agent {name!r}: include_contents must be 'default' or 'none', "
                f"got {include_contents!r}"
            )
        self.model = model
        self.instruction = instruction
        self.global_instruction = global_instruction
        self.tools: list[BaseTool | BaseToolset] = [_as_tool(t, name) for t in tools]
        self.output_key = output_key
        self.output_schema = output_schema
        self.input_schema = input_schema
        self.include_contents = include_contents
        self.disallow_transfer_to_parent = disallow_transfer_to_parent
        self.disallow_transfer_to_peers = disallow_transfer_to_peers
        self.generate_content_config = _checked_config(generate_content_config, name)
        self.callbacks: dict[str, tuple[Callback, ...]] = {}
        """The model and tool callback chains the flow runs, by field name."""
        self._callback_specs: dict[str, CallbackSpec] = {}
        self.before_model_callback = before_model_callback
        self.after_model_callback = after_model_callback
        self.on_model_error_callback = on_model_error_callback
        self.before_tool_callback = before_tool_callback
        self.after_tool_callback = after_tool_callback
        self.on_tool_error_callback = on_tool_error_callback
        self._effective: tuple[list[BaseTool], dict[str, BaseTool]] | None = None
        self._listed = (0, 0)
        """The identity and length of the ``tools`` list ``_effective`` was worked out from."""
        self._toolsets = False
        """Whether ``tools`` has toolsets (worked out with the effective tools)."""
        self._resolved: Model | None = None
        self._static_instruction: tuple[tuple[object, ...], str] | None = None
        """The system instruction last joined from plain text, with the pieces it came from."""

    @property
    def tools_by_name(self) -> dict[str, BaseTool]:
        """Every tool the model may call, ``transfer_to_agent`` included when offered."""
        return self._run_tools()[1]

    @property
    def run_tools(self) -> list[BaseTool]:
        """The tools the model is offered (functions and tools; toolsets are asked per step)."""
        return self._run_tools()[0]

    def _run_tools(self) -> tuple[list[BaseTool], dict[str, BaseTool]]:
        effective = self.static_tools()
        if self._toolsets:  # inside a model step, the tools its toolsets gave
            return step_tools_of(self) or effective
        return effective

    def static_tools(self) -> tuple[list[BaseTool], dict[str, BaseTool]]:
        """The tools given as tools (not toolsets), ``transfer_to_agent`` included, by name.

        Worked out again when ``tools`` was replaced or grew since (functions added after
        construction are wrapped then, as ADK takes them at every step).
        """
        listed = (id(self.tools), len(self.tools))
        if self._effective is None or listed != self._listed:
            from ._transfer import TransferToAgentTool, transfer_targets

            self.tools[:] = [_as_tool(t, self.name) for t in self.tools]  # the same list
            self._listed = (id(self.tools), len(self.tools))
            tools = [tool for tool in self.tools if isinstance(tool, BaseTool)]
            if self.output_schema is not None and self.tools:  # tools and a schema: as ADK
                tools.append(SetModelResponseTool(self.output_schema, agent=self.name))
            targets = transfer_targets(self)
            if targets:  # AutoFlow (R-LLM-1, R-XFER-2)
                tools.append(TransferToAgentTool(self, targets))
            self._effective = (tools, {tool.name: tool for tool in tools})
            self._toolsets = bool(self.toolsets)
        return self._effective

    @property
    def uses_toolsets(self) -> bool:
        """Whether ``tools`` has toolsets (so each model step asks them for tools)."""
        self.static_tools()
        return self._toolsets

    @property
    def toolsets(self) -> list[BaseToolset]:
        """The toolsets among ``tools``, asked for their tools at every model step."""
        return [tool for tool in self.tools if isinstance(tool, BaseToolset)]

    @property
    def canonical_model(self) -> Model:
        """The model this agent calls (R-LLM-9)."""
        if isinstance(self.model, Model):
            return self.model
        if self.model:
            if self._resolved is None:
                self._resolved = resolve_model(self.model)
            return self._resolved
        ancestor = self.parent_agent
        while ancestor is not None:
            if isinstance(ancestor, LlmAgent) and ancestor.model:
                return ancestor.canonical_model
            ancestor = ancestor.parent_agent
        default = type(self).default_model
        if isinstance(default, Model):
            return default
        if default:
            return resolve_model(default)
        raise ConfigurationError(f"agent {self.name!r} has no model and no ancestor gives one")

    def _answered_before(self, event: Event, cc: CallbackContext) -> Event:
        """A before-agent callback's answer is this agent's final response: it sets the
        ``output_key`` as the model's would (ADK does the same)."""
        from ._llm_flow import apply_output

        return apply_output(self, cc, event)

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        from ._llm_flow import run_llm_agent

        await run_llm_agent(self, ctx)


Agent = LlmAgent


def _as_tool(spec: ToolSpec, agent: str) -> BaseTool | BaseToolset:
    if isinstance(spec, BaseTool | BaseToolset):
        return spec
    if callable(spec):
        return FunctionTool(spec)
    raise ConfigurationError(
        f"agent {agent!r}: {spec!r} is neither a tool nor a function (nor a toolset)"
    )


def _checked_config(config: Mapping[str, Any] | None, agent: str) -> dict[str, Any]:
    config = dict(config or {})
    for key in _FORBIDDEN_CONFIG:
        if key in config:
            raise ConfigurationError(
                f"agent {agent!r}: set {key} through the agent, not generate_content_config"
            )
    return config
