"""JSON text of records written field by field: the fast path of :meth:`Event.to_json`.

:func:`record_text` writes exactly the text of ``dumps(unstructure(record))`` without building
the intermediate dicts: the strings, booleans and floats of plain fields are written directly,
everything else (payload dicts, ids, bytes) by the C encoder of the ``json`` module with the
options of :func:`~trio_agents._serde.dumps`. A value it cannot write that way (a NaN, a value of
an unexpected type, a container that holds itself) raises, and :func:`event_text` then takes the
general path, which writes the value or raises the error it always did.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from ._content import FrozenDict
from ._events import Event
from ._serde import _dumper, _Field, _fields, dumps, json_text, unstructure

__all__ = ["event_text", "record_text"]


def event_text(event: Event) -> str:
    """The JSON text of ``event``: what ``dumps(unstructure(event), path="event")`` returns."""
    try:
        return record_text(event)
    except (TypeError, ValueError, RecursionError):  # the general path writes it or says why
        return dumps(unstructure(event), path="event")


def record_text(record: Any) -> str:
    """The JSON text of an attrs record (camelCase keys, ``None`` omitted), as ``unstructure``
    lays it out; raises ``TypeError``/``ValueError`` on a value it does not write."""
    cls = type(record)
    write = _TEXT_WRITERS.get(cls) or _text_writer_of(cls)
    return write(record)


_TEXT_WRITERS: dict[type, Callable[[Any], str]] = {}


def _text_writer_of(cls: type) -> Callable[[Any], str]:
    """The function writing a ``cls`` record as JSON text, generated once per class (one test
    and one append per field, as attrs generates its methods)."""
    namespace: dict[str, Any] = {}
    lines = ["def write(record):", "    parts = []"]
    for index, field in enumerate(_fields(cls)):
        namespace[f"write_{index}"] = _value_writer(field)
        test = "value is not None" + (" and value" if field.omit_empty else "")
        key = encode_basestring(field.camel) + ":"
        lines.append(f"    value = record.{field.name}")
        lines.append(f"    if {test}:")
        lines.append(f"        parts.append({key!r} + write_{index}(value))")
    lines.append('    return "{" + ",".join(parts) + "}"')
    exec("\n".join(lines), namespace)
    write: Callable[[Any], str] = namespace["write"]
    _TEXT_WRITERS[cls] = write
    return write


def _value_writer(field: _Field) -> Callable[[Any], str]:
    if field.kind == "record":
        return record_text
    if field.kind == "records":
        return _records_text
    if field.kind == "plain":
        return _PLAIN.get(field.plain, json_text)
    if field.kind in {"payload", "versions"}:
        return _mapping_text
    dump = _dumper(field)  # bytes, ids, confirmations
    assert dump is not None
    return lambda value: json_text(dump(value))


def _records_text(values: Any) -> str:
    return "[" + ",".join([record_text(value) for value in values]) + "]"


def _mapping_text(value: Any) -> str:
    if type(value) is FrozenDict or type(value) is dict:
        return json_text(value) if value else "{}"
    return json_text(dict(value))


def _bool_text(value: Any) -> str:
    if value is True:
        return "true"
    return "false" if value is False else json_text(value)


def _float_text(value: Any) -> str:
    number = float(value)  # an int timestamp is written as 1.0, as it reads back
    if not math.isfinite(number):
        raise ValueError(f"{number!r} is not a JSON number")
    return float.__repr__(number)


_PLAIN: dict[str, Callable[[Any], str]] = {
    "str": encode_basestring,  # raises TypeError for anything but a str
    "bool": _bool_text,
    "float": _float_text,
}
