"""The key of a model request: a stable hash of what the model is asked.

One function serves the response cache (:class:`~trio_agents.plugins.ResponseCachePlugin`) and
record/replay (:class:`~trio_agents.testing.RecordingModel`); recordings store it, so it must not
change between releases without a new recording format.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .._errors import SerializationError
from .._serde import check_json_value, unstructure
from ._base import LlmRequest

__all__ = ["request_key"]


def request_key(request: LlmRequest) -> str:
    """A stable SHA-256 (hex) of what a model is asked.

    The canonical JSON (sorted keys, no spaces) of the model name, system instruction, contents,
    tool declarations, generation config and response schema. Function-call ids are replaced by
    ``call-1``, ``call-2``, ... in order of appearance: ids minted by the client differ from run
    to run, which call a response answers does not. Labels are left out.

    Raises:
        SerializationError: the request holds a value that is not JSON; ``path`` names it.
    """
    return hashlib.sha256(_canonical_json(request).encode()).hexdigest()


def _canonical_json(request: LlmRequest) -> str:
    canonical = _plain(
        {
            "model": request.model,
            "system_instruction": request.system_instruction,
            "contents": _renumbered_calls([unstructure(c) for c in request.contents]),
            "tools": [unstructure(t) for t in request.tools],
            "generation_config": request.generation_config,
            "response_schema": request.response_schema,
        }
    )
    try:
        return json.dumps(
            canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        check_json_value(canonical, "request")  # names the offending field
        raise SerializationError(f"cannot key the request: {exc}", path="request") from exc


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _renumbered_calls(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    numbers: dict[str, str] = {}
    for content in contents:
        for part in content.get("parts", []):
            for field in ("functionCall", "functionResponse"):
                call = part.get(field)
                if call is not None and "id" in call:
                    call["id"] = numbers.setdefault(call["id"], f"call-{len(numbers) + 1}")
    return contents
