"""JSON schemas from Python type hints (for tool declarations and output schemas)."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from .._errors import ConfigurationError

__all__ = ["is_pydantic_model", "json_schema"]

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def is_pydantic_model(hint: Any) -> bool:
    """Whether ``hint`` is a pydantic model class (recognised by its methods: pydantic is not a
    dependency, but ADK users describe schemas with it)."""
    return (
        isinstance(hint, type)
        and callable(getattr(hint, "model_json_schema", None))
        and callable(getattr(hint, "model_validate", None))
    )


def json_schema(hint: Any, *, where: str) -> dict[str, Any]:
    """The JSON schema of ``hint``; ``where`` names the place for error messages."""
    if hint is Any or hint is typing.Any:
        return {}
    if is_pydantic_model(hint):
        return dict(hint.model_json_schema())
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is type(None):
        return {"type": "null"}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"type": "string", "enum": [str(m.value) for m in hint]}
    if isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint)):
        return record_schema(hint, where=where)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return _union(args, where=where)
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple, set, frozenset):
        item = args[0] if args else Any
        return {"type": "array", "items": json_schema(item, where=f"{where}[]")}
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return {"type": "object"}
    raise ConfigurationError(f"{where}: cannot describe type {hint!r} as JSON schema")


def _union(args: tuple[Any, ...], *, where: str) -> dict[str, Any]:
    others = [a for a in args if a is not type(None)]
    nullable = len(others) < len(args)
    if len(others) == 1:
        schema = json_schema(others[0], where=where)
    else:
        schema = {"anyOf": [json_schema(a, where=where) for a in others]}
    if nullable:
        schema["nullable"] = True
    return schema


def record_schema(cls: type, *, where: str) -> dict[str, Any]:
    """The object schema of an attrs class or dataclass."""
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, has_default in _record_fields(cls):
        properties[name] = json_schema(hints.get(name, Any), where=f"{where}.{name}")
        if not has_default:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _record_fields(cls: type) -> list[tuple[str, bool]]:
    if attrs.has(cls):
        return [(f.name, f.default is not attrs.NOTHING) for f in attrs.fields(cls)]
    return [
        (
            f.name,
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    ]
