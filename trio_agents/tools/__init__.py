"""Tools: what LLM agents can call."""

from __future__ import annotations

from .._exports import publish as _publish
from ._agent_tool import AgentTool as AgentTool
from ._base import BaseTool as BaseTool, ToolContext as ToolContext
from ._exit_loop import exit_loop as exit_loop
from ._function import (
    FunctionTool as FunctionTool,
    LongRunningFunctionTool as LongRunningFunctionTool,
)
from ._memory_tools import (
    LoadMemoryTool as LoadMemoryTool,
    PreloadMemoryTool as PreloadMemoryTool,
    load_memory as load_memory,
    preload_memory as preload_memory,
)

__all__ = [
    "AgentTool",
    "BaseTool",
    "FunctionTool",
    "LoadMemoryTool",
    "LongRunningFunctionTool",
    "PreloadMemoryTool",
    "ToolContext",
    "exit_loop",
    "load_memory",
    "preload_memory",
]

_publish(__name__, globals(), __all__)
