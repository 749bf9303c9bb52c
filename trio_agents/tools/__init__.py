"""Tools: what LLM agents can call."""

from __future__ import annotations

from ._agent_tool import AgentTool as AgentTool
from ._base import BaseTool as BaseTool, ToolContext as ToolContext
from ._exit_loop import exit_loop as exit_loop
from ._function import (
    FunctionTool as FunctionTool,
    LongRunningFunctionTool as LongRunningFunctionTool,
)

__all__ = [
    "AgentTool",
    "BaseTool",
    "FunctionTool",
    "LongRunningFunctionTool",
    "ToolContext",
    "exit_loop",
]
