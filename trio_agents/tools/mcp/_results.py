"""What an MCP tool's result becomes: the function response the model reads."""

from __future__ import annotations

from typing import Any

import mcp_types

__all__ = ["function_response"]


def function_response(result: mcp_types.CallToolResult) -> dict[str, Any]:
    """The result as JSON, in the shape the MCP result has on the wire.

    ``content`` lists the blocks (text as ``{"type": "text", "text": ...}``, images and audio as
    inline base64 ``data`` with their ``mimeType``), ``structuredContent`` the structured value
    when the server gave one. An error result (``isError``) also carries ``error``: its text, so
    the model reads it as a failed call rather than an answer.
    """
    response: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    response.pop("_meta", None)
    if result.is_error:
        texts = [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]
        response["error"] = "\n".join(texts) or "the tool failed"
    return response


def error_response(message: str) -> dict[str, Any]:
    """A JSON-RPC error from the server, as the model reads it."""
    return {"error": message, "isError": True}
