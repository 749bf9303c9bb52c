"""Toolsets: sources of tools that are resolved anew at every model step."""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import attrs

from .._errors import ConfigurationError, ToolsetError
from ._base import BaseTool

if TYPE_CHECKING:
    from .._context import ReadonlyContext

__all__ = ["BaseToolset", "ToolPredicate"]

ToolPredicate: TypeAlias = Callable[[BaseTool, "ReadonlyContext | None"], bool]
"""Decides whether a tool of a toolset is offered to the model in a context."""


class BaseToolset(abc.ABC):
    """A source of tools for an :class:`~trio_agents.agents.LlmAgent`, asked at every model step.

    Subclasses implement :meth:`get_tools` (and :meth:`close` when they hold resources).
    ``tool_filter`` keeps only the tools named in a list, or those a predicate of the tool and
    the context accepts; ``tool_name_prefix`` renames every tool to ``"<prefix>_<name>"`` as the
    model sees it (the tool still runs under its own name).
    """

    def __init__(
        self,
        *,
        tool_filter: ToolPredicate | Sequence[str] | None = None,
        tool_name_prefix: str | None = None,
    ) -> None:
        if tool_filter is not None and not callable(tool_filter):
            names = isinstance(tool_filter, list | tuple | set | frozenset)
            if not names or not all(isinstance(n, str) for n in tool_filter):
                raise ConfigurationError(
                    f"{type(self).__name__}: tool_filter must be a list of tool names or a "
                    f"predicate, got {tool_filter!r}"
                )
            tool_filter = list(tool_filter)
        if tool_name_prefix is not None and (
            not isinstance(tool_name_prefix, str) or not tool_name_prefix
        ):
            raise ConfigurationError(
                f"{type(self).__name__}: tool_name_prefix must be a non-empty string, "
                f"got {tool_name_prefix!r}"
            )
        self.tool_filter = tool_filter
        self.tool_name_prefix = tool_name_prefix

    @property
    def name(self) -> str:
        """How errors name this toolset."""
        return type(self).__name__

    @abc.abstractmethod
    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        """The tools on offer in ``readonly_context`` (filtered, under their own names)."""

    async def close(self) -> None:  # ruff: ignore[empty-method-without-abstract-decorator] - optional hook
        """Release what the toolset holds (connections, processes); the default holds nothing."""

    def is_tool_selected(self, tool: BaseTool, readonly_context: ReadonlyContext | None) -> bool:
        """Whether ``tool_filter`` lets ``tool`` through."""
        selector = self.tool_filter
        if selector is None:
            return True
        if callable(selector):
            return bool(selector(tool, readonly_context))
        return tool.name in selector

    async def get_tools_with_prefix(
        self, readonly_context: ReadonlyContext | None = None
    ) -> list[BaseTool]:
        """The filtered tools as the model sees them, renamed with ``tool_name_prefix``.

        Raises:
            ToolsetError: :meth:`get_tools` failed (its error chained), naming the toolset.
        """
        try:
            tools = await self.get_tools(readonly_context)
        except ToolsetError:
            raise
        except Exception as exc:
            raise ToolsetError(
                f"toolset {self.name!r} could not list its tools: {type(exc).__name__}: {exc}",
                toolset=self.name,
            ) from exc
        selected = [tool for tool in tools if self.is_tool_selected(tool, readonly_context)]
        prefix = self.tool_name_prefix
        return selected if prefix is None else [_renamed(tool, prefix) for tool in selected]


def _renamed(tool: BaseTool, prefix: str) -> BaseTool:
    """A shallow copy of ``tool`` whose name and declaration carry ``prefix``."""
    renamed = copy.copy(tool)
    renamed.name = f"{prefix}_{tool.name}"
    declared = tool.declaration()
    if declared is not None and declared.name != renamed.name:  # a declaration made once
        declaration = attrs.evolve(declared, name=renamed.name)
        renamed.declaration = lambda: declaration  # type: ignore[method-assign]
    return renamed
