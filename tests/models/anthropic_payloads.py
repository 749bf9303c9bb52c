"""Anthropic Messages API payloads and stream events, shared by the Anthropic tests."""

from __future__ import annotations

import json
from typing import Any

from trio_agents.models import ServerSentEvent


def answer(text: str = "Hello!", **extra: Any) -> dict[str, Any]:
    """A non-streamed ``message`` answer with one text block."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 2},
        **extra,
    }


def sse_text(events: list[dict[str, Any]]) -> str:
    """The wire text of ``events`` as the API sends them (``event:`` and ``data:`` lines)."""
    return "".join(sse_frame(e) for e in events)


def sse_frame(event: dict[str, Any]) -> str:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"


def sse(data: dict[str, Any], *, named: bool = True) -> ServerSentEvent:
    return ServerSentEvent(json.dumps(data), data["type"] if named else "message")


def message_start(usage: dict[str, int] | None = None) -> dict[str, Any]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 12, "output_tokens": 1},
    }
    return {"type": "message_start", "message": message}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, kind: str, **fields: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, **fields}}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str = "end_turn", output_tokens: int = 30) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


MESSAGE_STOP = {"type": "message_stop"}


def text_stream(*pieces: str, stop_reason: str = "end_turn") -> list[dict[str, Any]]:
    return [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        *[delta(0, "text_delta", text=p) for p in pieces],
        block_stop(0),
        message_delta(stop_reason),
        MESSAGE_STOP,
    ]
