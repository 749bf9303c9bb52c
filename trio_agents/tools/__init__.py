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
from ._scope import ToolsetScope as ToolsetScope, current_scope as current_scope
from ._set_model_response import SetModelResponseTool as SetModelResponseTool
from ._toolset import BaseToolset as BaseToolset, ToolPredicate as ToolPredicate

__all__ = [
    "AgentTool",
    "BaseTool",
    "BaseToolset",
    "FunctionTool",
    "LoadMemoryTool",
    "LongRunningFunctionTool",
    "PreloadMemoryTool",
    "SetModelResponseTool",
    "ToolContext",
    "ToolPredicate",
    "ToolsetScope",
    "current_scope",
    "exit_loop",
    "load_memory",
    "preload_memory",
]

_publish(__name__, globals(), __all__)
