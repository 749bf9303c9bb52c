"""The tool interface and the context a tool call runs with."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from .._context import CallbackContext, EventActionsDraft, InvocationContext
from .._errors import ConfigurationError
from .._tool_confirmation import ToolConfirmation
from .._util import check_timeout

if TYPE_CHECKING:
    from ..models._base import FunctionDeclaration, LlmRequest
    from ._child_pause import ChildPause, ChildResume

__all__ = ["BaseTool", "ToolContext"]


class ToolContext(CallbackContext):
    """The context of one tool call: write-through state, its own actions, the call id.

    Every call of a model turn gets its own ``ToolContext``; their actions merge, in call order,
    into the function-response event.

    ``tool_confirmation`` is the user's answer when the call runs again after a confirmation
    request (None otherwise).
    """

    __slots__ = ("function_call_id", "paused_child", "resume_child", "tool_confirmation")

    def __init__(
        self,
        ctx: InvocationContext,
        *,
        function_call_id: str | None = None,
        actions: EventActionsDraft | None = None,
        tool_confirmation: ToolConfirmation | None = None,
    ) -> None:
        super().__init__(ctx, actions)
        self.function_call_id = function_call_id
        self.tool_confirmation = tool_confirmation
        self.paused_child: ChildPause | None = None
        """Set by an :class:`AgentTool` whose agent paused (the parent pauses with it)."""
        self.resume_child: ChildResume | None = None
        """Set when an :class:`AgentTool` call runs again to continue its paused agent."""

    def request_confirmation(self, *, hint: str | None = None, payload: Any = None) -> None:
        """Ask the user to approve this call; it runs again with the answer.

        After the tool returns, the agent emits a long-running ``adk_request_confirmation`` call
        for it and ends its turn; the client's answer (``{"confirmed": bool, "payload": ...}``)
        re-runs this call with :attr:`tool_confirmation` set. What the tool returns now is its
        provisional response.

        Raises:
            ConfigurationError: the context belongs to no function call.
        """
        if not self.function_call_id:
            raise ConfigurationError(
                "request_confirmation needs a function call: it works only in a tool's context"
            )
        self.actions.requested_tool_confirmations[self.function_call_id] = ToolConfirmation(
            hint=hint or "", payload=payload
        )


class BaseTool(abc.ABC):
    """A tool an LLM agent can call.

    Subclasses give a :meth:`declaration` and implement :meth:`run_async`. ``is_long_running``
    marks tools whose answer may come later (R-LRO).
    """

    def __init__(
        self,
        *,
        name: str,
        description: str = "",
        is_long_running: bool = False,
        timeout: float | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.is_long_running = is_long_running
        self.timeout = check_timeout(timeout, f"tool {name!r}: timeout")
        """Seconds one call may take, or None. Past it the call is cancelled and the model gets
        ``{"error": "timeout", "tool": name, "seconds": timeout}`` as the tool's response."""

    def declaration(self) -> FunctionDeclaration | None:
        """How the model sees this tool, or None for tools that only edit the request."""
        return None

    async def process_llm_request(
        self, *, tool_context: ToolContext, llm_request: LlmRequest
    ) -> None:
        """Add this tool to ``llm_request`` (its declaration, by default)."""
        declaration = self.declaration()
        if declaration is not None:
            llm_request.tools.append(declaration)

    @abc.abstractmethod
    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Run the tool with the model's arguments; return a JSON-ready result."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
