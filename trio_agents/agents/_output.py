"""Validation of structured model output against ``output_schema`` / ``input_schema``."""

from __future__ import annotations

import dataclasses
import json
import string
from collections.abc import Mapping
from typing import Any, NoReturn

import attrs
import cattrs

from .._errors import SerializationError
from ..tools._schema import is_pydantic_model

__all__ = ["parse_json_answer", "validate_output"]

_converter = cattrs.Converter(forbid_extra_keys=True)
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def parse_json_answer(text: str) -> Any:
    """Parse a model's JSON answer, also when the whole answer is wrapped in a Markdown code
    fence (```` ```json ... ``` ````), as ADK accepts it.

    Raises:
        json.JSONDecodeError: the answer is not JSON.
    """
    stripped = text.strip()
    if len(stripped) >= 6 and stripped.startswith("```") and stripped.endswith("```"):
        inner = stripped[3:-3].lstrip(string.ascii_letters + string.digits + "_")
        text = inner.lstrip(" \t").removeprefix("\n").strip()
    return json.loads(text)


def validate_output(schema: type | Mapping[str, Any] | None, data: Any, *, where: str) -> Any:
    """``data`` validated against ``schema``, as plain JSON data.

    ``schema`` is an attrs class or dataclass (structured with cattrs, then unstructured back),
    a pydantic model (validated, then dumped as JSON without ``None`` fields, as ADK stores it),
    or a JSON schema dict (checked for ``type``, ``properties``, ``required``, ``items``,
    ``enum``).

    Raises:
        SerializationError: ``data`` does not fit; ``path`` names the first mismatch (``$`` is
        the root) and the message starts with ``where``.
    """
    if schema is None:
        return data
    try:
        if is_pydantic_model(schema):
            return _validated(schema, data)
        if isinstance(schema, type):
            return _structured(schema, data)
        check_json_schema(schema, data, path="$")
    except SerializationError as exc:
        raise SerializationError(f"{where}: {exc}", path=exc.path) from exc.__cause__
    return data


def _validated(schema: Any, data: Any) -> Any:
    try:
        record = schema.model_validate(data)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) and errors() else {}
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.get("loc", ()))
        raise SerializationError(f"${path}: {exc}", path=f"${path}") from exc
    return record.model_dump(mode="json", exclude_none=True)


def _structured(schema: type, data: Any) -> Any:
    record = attrs.has(schema) or dataclasses.is_dataclass(schema)
    if record and not isinstance(data, Mapping):  # cattrs would fail with an AttributeError
        raise SerializationError(f"$: expected object, got {type(data).__name__}", path="$")
    try:
        return _converter.unstructure(_converter.structure(data, schema))
    except cattrs.BaseValidationError as exc:  # every mismatch inside a record
        messages = cattrs.transform_error(exc)
        path = messages[0].rpartition(" @ ")[2] if messages else "$"
        raise SerializationError("; ".join(messages), path=path) from exc
    except (ValueError, TypeError) as exc:
        if record:
            raise  # cattrs reports a record's mismatches as above: this is a bug
        raise SerializationError(f"$: {exc}", path="$") from exc  # int("x"), Color("mauve")


def check_json_schema(schema: Mapping[str, Any], data: Any, *, path: str) -> None:
    """Raise :class:`~trio_agents.SerializationError` naming ``path`` when ``data`` does not fit
    ``schema``."""
    if data is None and schema.get("nullable"):
        return
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _JSON_TYPES:
        ok = isinstance(data, _JSON_TYPES[expected])
        if ok and expected in ("integer", "number") and isinstance(data, bool):
            ok = False
        if not ok:
            _mismatch(path, f"expected {expected}, got {type(data).__name__}")
    if "enum" in schema and data not in schema["enum"]:
        _mismatch(path, f"{data!r} is not one of {schema['enum']!r}")
    if isinstance(data, dict):
        for key in schema.get("required", ()):
            if key not in data:
                _mismatch(path, f"missing required property {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in data:
                check_json_schema(sub, data[key], path=f"{path}.{key}")
    if isinstance(data, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(data):
            check_json_schema(schema["items"], item, path=f"{path}[{i}]")


def _mismatch(path: str, message: str) -> NoReturn:
    raise SerializationError(f"{path}: {message}", path=path)
