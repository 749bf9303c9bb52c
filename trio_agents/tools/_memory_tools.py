"""Memory tools: ``load_memory`` (the model asks) and ``preload_memory`` (always looked up).

Both search the Runner's memory service through :meth:`ToolContext.search_memory`, so both need
``Runner(memory_service=...)`` (``InMemoryRunner`` has one).
"""

from __future__ import annotations

import logging
from typing import Any

from .._errors import ConfigurationError
from ..memory import MemoryEntry
from ..models._base import FunctionDeclaration, LlmRequest
from ._base import BaseTool, ToolContext

__all__ = ["LoadMemoryTool", "PreloadMemoryTool", "load_memory", "preload_memory"]

logger = logging.getLogger(__name__)

LOAD_MEMORY_INSTRUCTION = (
    "You have memory. You can use it to answer questions. If any questions need you to look up"
    " the memory, you should call load_memory function with a query."
)


class LoadMemoryTool(BaseTool):
    """A tool the model calls with a query to search the user's past conversations.

    It answers ``{"memories": [{"author", "timestamp", "text"}, ...]}``, best first, and tells
    the model it has memory (ADK's instruction, added to the system instruction).
    """

    def __init__(self) -> None:
        super().__init__(
            name="load_memory",
            description="Loads the memory for the current user: past conversations relevant "
            "to a query.",
        )

    def declaration(self) -> FunctionDeclaration:
        return FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for."}},
                "required": ["query"],
            },
        )

    async def process_llm_request(
        self, *, tool_context: ToolContext, llm_request: LlmRequest
    ) -> None:
        await super().process_llm_request(tool_context=tool_context, llm_request=llm_request)
        llm_request.append_instructions(LOAD_MEMORY_INSTRUCTION)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        query = args.get("query")
        if not isinstance(query, str):
            return {"error": f"load_memory needs a string 'query', got {query!r}"}
        found = await tool_context.search_memory(query)
        return {
            "memories": [
                {"author": m.author, "timestamp": m.timestamp, "text": m.text}
                for m in found.memories
            ]
        }


def _memory_lines(memories: list[MemoryEntry]) -> list[str]:
    """ADK's rendering: a ``Time:`` line, then ``author: text``, for each memory."""
    lines = []
    for memory in memories:
        if memory.timestamp:
            lines.append(f"Time: {memory.timestamp}")
        if text := memory.text:
            lines.append(f"{memory.author}: {text}" if memory.author else text)
    return lines


class PreloadMemoryTool(BaseTool):
    """Not offered to the model: before every model call of the agent it searches memory with
    the text of the user's message and adds what it found to the system instruction.

    A failing memory backend is logged and the request goes on without memories (as in ADK); a
    Runner without a memory service is a :class:`~trio_agents.ConfigurationError`.
    """

    def __init__(self) -> None:
        super().__init__(name="preload_memory", description="Recalls past conversations.")

    def declaration(self) -> None:
        return None

    async def process_llm_request(
        self, *, tool_context: ToolContext, llm_request: LlmRequest
    ) -> None:
        message = tool_context.user_content
        parts = message.parts if message is not None else ()
        query = " ".join(p.text for p in parts if p.text and not p.thought)
        if not query.strip():
            return
        try:
            found = await tool_context.search_memory(query)
        except ConfigurationError:
            raise
        except Exception:
            logger.warning("preload_memory: memory search failed", exc_info=True)
            return
        if lines := _memory_lines(found.memories):
            llm_request.append_instructions(
                "The following content is from your previous conversations with the user.\n"
                "They may be useful for answering the user's current query.\n"
                "<PAST_CONVERSATIONS>\n" + "\n".join(lines) + "\n</PAST_CONVERSATIONS>"
            )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Only reached when a model calls a tool it was never offered: tell it so."""
        return {"error": "preload_memory is not a callable tool"}


load_memory = LoadMemoryTool()
preload_memory = PreloadMemoryTool()
