"""``FunctionTool(require_confirmation=...)``: whether a call needs approval, and the gate."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .._errors import ConfigurationError
from ._base import ToolContext

__all__: list[str] = []  # internal: FunctionTool holds one


class ConfirmationRule:
    """When a tool's calls need the user's approval: never, always, or as a predicate says.

    The predicate gets the call's arguments it names (all of them if it takes ``**kwargs``)
    and ``tool_context`` if it has a parameter of that name; it may be sync or async.
    """

    __slots__ = ("_accepts_all", "_names", "rule", "tool")

    def __init__(self, tool: str, rule: bool | Callable[..., Any]) -> None:
        if not (isinstance(rule, bool) or callable(rule)):
            raise ConfigurationError(
                f"tool {tool!r}: require_confirmation must be a bool or a callable of the "
                f"tool's arguments, got {type(rule).__name__}"
            )
        self.tool = tool
        self.rule = rule
        self._names: frozenset[str] = frozenset()
        self._accepts_all = False
        if callable(rule):
            params = inspect.signature(rule).parameters.values()
            self._accepts_all = any(p.kind is p.VAR_KEYWORD for p in params)
            self._names = frozenset(
                p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            )

    def __bool__(self) -> bool:
        """False when no call ever needs approval (the gate is skipped)."""
        return self.rule is not False

    async def required(self, args: dict[str, Any], tool_context: ToolContext) -> bool:
        """Whether the call with ``args`` needs approval."""
        rule = self.rule
        if not callable(rule):
            return bool(rule)
        kwargs = args if self._accepts_all else {k: v for k, v in args.items() if k in self._names}
        if "tool_context" in self._names:
            kwargs = {**kwargs, "tool_context": tool_context}
        answer = rule(**kwargs)
        if inspect.isawaitable(answer):
            answer = await answer
        return bool(answer)

    async def gate(self, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any] | None:
        """None when the call may run; else the response the model gets instead.

        Without an answer yet, asks for a confirmation (the response event then skips
        summarization, as the turn ends waiting for the user); with a rejection, says so.
        """
        if not await self.required(args, tool_context):
            return None
        confirmation = tool_context.tool_confirmation
        name = self.tool
        if confirmation is None:
            tool_context.request_confirmation(
                hint=(
                    f"Approve or reject the call to {name}(): answer with a function response "
                    'carrying {"confirmed": true} or {"confirmed": false}.'
                )
            )
            tool_context.actions.skip_summarization = True
            return {"error": f"`{name}()` needs the user's confirmation; it has not run yet."}
        if not confirmation.confirmed:
            return {"error": f"The user rejected the call to `{name}()`; it did not run."}
        return None
