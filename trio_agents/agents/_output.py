"""Validation of structured model output against ``output_schema`` / ``input_schema``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cattrs

__all__ = ["validate_output"]

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


def validate_output(schema: type | Mapping[str, Any] | None, data: Any, *, where: str) -> Any:
    """``data`` validated against ``schema``, as plain JSON data.

    ``schema`` is an attrs class or dataclass (structured with cattrs, then unstructured back),
    or a JSON schema dict (checked for ``type``, ``properties``, ``required``, ``items``,
    ``enum``). Raises ``ValueError`` naming the first mismatch.
    """
    if schema is None:
        return data
    if isinstance(schema, type):
        try:
            return _converter.unstructure(_converter.structure(data, schema))
        except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
            messages = (
                "; ".join(cattrs.transform_error(exc))
                if isinstance(exc, cattrs.BaseValidationError)
                else str(exc)
            )
            raise ValueError(f"{where}: {messages}") from exc
    check_json_schema(schema, data, path="$")
    return data


def check_json_schema(schema: Mapping[str, Any], data: Any, *, path: str) -> None:
    """Raise ``ValueError`` naming ``path`` when ``data`` does not fit ``schema``."""
    if data is None and schema.get("nullable"):
        return
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _JSON_TYPES:
        ok = isinstance(data, _JSON_TYPES[expected])
        if ok and expected in ("integer", "number") and isinstance(data, bool):
            ok = False
        if not ok:
            raise ValueError(f"{path}: expected {expected}, got {type(data).__name__}")
    if "enum" in schema and data not in schema["enum"]:
        raise ValueError(f"{path}: {data!r} is not one of {schema['enum']!r}")
    if isinstance(data, dict):
        for key in schema.get("required", ()):
            if key not in data:
                raise ValueError(f"{path}: missing required property {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in data:
                check_json_schema(sub, data[key], path=f"{path}.{key}")
    if isinstance(data, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(data):
            check_json_schema(schema["items"], item, path=f"{path}[{i}]")
