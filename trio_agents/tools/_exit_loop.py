"""The ``exit_loop`` tool: ends the enclosing LoopAgent."""

from __future__ import annotations

from ._base import ToolContext
from ._function import FunctionTool

__all__ = ["exit_loop"]


def _exit_loop(tool_context: ToolContext) -> None:
    """Exit the loop. Call this only when you are told to."""
    tool_context.actions.escalate = True
    tool_context.actions.skip_summarization = True


exit_loop = FunctionTool(_exit_loop, name="exit_loop")
"""Sets ``escalate`` (ending enclosing loops) and ``skip_summarization`` (R-TOOL-7)."""
