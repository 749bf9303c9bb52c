"""Gemini API payloads (``GenerateContentResponse``) and SSE framing, shared by the Gemini tests."""

from __future__ import annotations

import json
from typing import Any

KEY = "AIzaSy-fake-gemini-key-0123456789"


def answer(*parts: dict[str, Any], reason: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    """A ``GenerateContentResponse`` whose first candidate has ``parts`` (and ``reason``)."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if reason is not None:
        candidate["finishReason"] = reason
    return {"candidates": [candidate], **extra}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"text": value, **extra}


def call(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    function_call: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        function_call["id"] = call_id
    return {"functionCall": function_call}


def usage(prompt: int = 7, candidates: int = 5, **extra: int) -> dict[str, int]:
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + sum(extra.values()),
        **extra,
    }


def sse(*chunks: dict[str, Any]) -> str:
    """The wire text of a stream: ``data:`` events separated by CRLF blank lines, as Gemini does."""
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)


def streamed(words: list[str], *, last: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A text answer as the API streams it: one chunk per word, the finish reason and usage on the
    last chunk only (``last`` adds parts to that chunk, e.g. a function call)."""
    chunks = [answer(text(w), reason=None) for w in words[:-1]]
    final_parts = [text(words[-1])] if words else []
    if last is not None:
        final_parts.append(last)
    chunks.append(answer(*final_parts, usageMetadata=usage(), modelVersion="gemini-test-001"))
    return chunks
