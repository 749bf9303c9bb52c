"""Shape checks for provider JSON: a value is what the documented schema says, or ``Malformed``.

Shared by the wire modules; each turns :class:`Malformed` into a
:class:`~trio_agents.models.ModelResponseError` naming its provider and model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["count", "json_list", "json_object", "optional_str"]  # and Malformed, internal


class Malformed(Exception):
    """Internal: the answer does not have the documented shape (becomes ModelResponseError)."""


def json_object(value: object, where: str, *, empty: bool = False) -> Mapping[str, Any]:
    """``value`` if it is a JSON object (or ``{}`` for null when ``empty``)."""
    if value is None and empty:
        return {}
    if not isinstance(value, Mapping):
        raise Malformed(f"{where} is not a JSON object")
    return value


def json_list(value: object, where: str, *, empty: bool = False) -> list[Any]:
    """``value`` if it is a JSON list (or ``[]`` for null when ``empty``)."""
    if value is None and empty:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{where} is not a JSON list")
    return value


def optional_str(value: object, where: str) -> str | None:
    """``value`` if it is a string or null."""
    if value is None or isinstance(value, str):
        return value
    raise Malformed(f"{where} is not a string")


def count(value: object, where: str) -> int | None:
    """``value`` if it is an integer (not a bool) or null."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise Malformed(f"{where} is not an integer")
