"""The one JSON converter of trio_agents.

Rules (ADK-compatible, R-EV-8):

* record field names are camelCase on output (``invocationId``, ``stateDelta``); camelCase and
  snake_case are both accepted on input;
* fields whose value is ``None`` are omitted; empty dicts are kept (as ADK does);
* payload dicts (state deltas, function arguments and responses, custom metadata) are passed
  through verbatim: their keys are never renamed;
* bytes are written as URL-safe base64 with padding, as pydantic (and so ADK) writes them;
  both base64 alphabets, padded or not, are accepted on input;
* ``long_running_tool_ids`` is a sorted list;
* ``actions.requestedToolConfirmations`` maps call ids to ``{"hint", "confirmed", "payload"}``
  objects; it is written only when not empty (ADK reads a missing one as empty);
* unknown fields are ignored at every level; malformed input (bad JSON, ``NaN`` or a number too
  large for a float, a value of the wrong type) raises :class:`~trio_agents.SerializationError`
  naming the path, and so does a value that cannot be written.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import sys
import typing
from _json import make_encoder
from collections.abc import Callable, Iterator, Mapping
from json.encoder import encode_basestring
from typing import Any, TypeVar

import attrs

from ._content import (
    Blob,
    CodeExecutionResult,
    Content,
    ExecutableCode,
    FileData,
    FunctionCall,
    FunctionResponse,
    Part,
)
from ._errors import SerializationError
from ._events import _NO_ACTIONS as NO_ACTIONS, Event, EventActions, UsageMetadata
from ._tool_confirmation import ToolConfirmation

__all__ = [
    "MAX_DEPTH",
    "check_json_value",
    "check_key",
    "check_event",
    "check_storable",
    "check_text",
    "dump_event",
    "dumps",
    "deeper_stack",
    "is_json_value",
    "json_text",
    "load_event",
    "load_stored",
    "loads",
    "structure",
    "unstructure",
]

T = TypeVar("T")

_RECORDS: tuple[type, ...] = (
    Event,
    EventActions,
    UsageMetadata,
    Content,
    Part,
    FunctionCall,
    FunctionResponse,
    Blob,
    FileData,
    ExecutableCode,
    CodeExecutionResult,
)
_BYTES_FIELDS = {(Blob, "data"), (Part, "thought_signature")}
_PAYLOAD_FIELDS = {
    (EventActions, "state_delta"),
    (EventActions, "requested_auth_configs"),
    (EventActions, "agent_state"),
    (FunctionCall, "args"),
    (FunctionResponse, "response"),
    (Event, "custom_metadata"),
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


@attrs.frozen
class _Field:
    name: str
    camel: str
    kind: str  # "record", "records", "bytes", "payload", "versions", "ids", "confirmations",
    # "plain"
    record: type | None
    plain: str = ""  # for plain fields: the base type name ("str", "bool", "int", "float")
    omit_empty: bool = False  # an empty value is not written (as for None)


def _field_kind(cls: type, field: attrs.Attribute[Any]) -> tuple[str, type | None]:
    if (cls, field.name) in _BYTES_FIELDS:
        return "bytes", None
    if (cls, field.name) in _PAYLOAD_FIELDS:
        return "payload", None
    if cls is EventActions and field.name == "artifact_delta":
        return "versions", None
    if cls is Event and field.name == "long_running_tool_ids":
        return "ids", None
    if cls is EventActions and field.name == "requested_tool_confirmations":
        return "confirmations", None
    if cls is Content and field.name == "parts":
        return "records", Part
    candidates = (field.type, *typing.get_args(field.type))
    for record in _RECORDS:
        if record in candidates:
            return "record", record
    return "plain", None


def _fields(cls: type) -> tuple[_Field, ...]:
    found = _FIELDS.get(cls)
    if found is None:
        attrs.resolve_types(cls)
        found = tuple(
            _Field(
                f.name,
                _camel(f.name),
                *_field_kind(cls, f),
                _base_type(f),
                omit_empty=_field_kind(cls, f)[0] == "confirmations",
            )
            for f in attrs.fields(cls)
        )
        _FIELDS[cls] = found
    return found


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _base_type(field: attrs.Attribute[Any]) -> str:
    args = [a for a in typing.get_args(field.type) if a is not type(None)] or [field.type]
    return getattr(args[0], "__name__", "")


# -- out -------------------------------------------------------------------------------------------


def unstructure(record: Any) -> dict[str, Any]:
    """The JSON object of a record (camelCase keys, ``None`` omitted)."""
    out: dict[str, Any] = {}
    for name, camel, dump, omit_empty in _writers(type(record)):
        value = getattr(record, name)
        if value is None or (omit_empty and not value):
            continue
        out[camel] = value if dump is None else dump(value)
    return out


_Writer = tuple[str, str, Callable[[Any], Any] | None, bool]
"""A field's name, its JSON key, how its value is written (None: as it is), whether an empty
value is left out."""

_WRITERS: dict[type, tuple[_Writer, ...]] = {}


def _writers(cls: type) -> tuple[_Writer, ...]:
    """How each field of ``cls`` is written, worked out once per class."""
    found = _WRITERS.get(cls)
    if found is None:
        found = _WRITERS[cls] = tuple(
            (f.name, f.camel, _dumper(f), f.omit_empty) for f in _fields(cls)
        )
    return found


def _dumper(field: _Field) -> Callable[[Any], Any] | None:
    kind = field.kind
    if kind == "record":
        return unstructure
    if kind == "records":
        return _dump_records
    if kind == "bytes":
        return _dump_bytes
    if kind == "ids":
        return sorted
    if kind in {"payload", "versions"}:
        return dict
    if kind == "confirmations":
        return _dump_confirmations
    if field.plain == "float":
        return float  # an int timestamp is written as 1.0, as it reads back
    return None


def _dump_records(values: Any) -> list[dict[str, Any]]:
    return [unstructure(v) for v in values]


def _dump_bytes(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).decode("ascii")


def _dump_confirmations(value: Mapping[str, ToolConfirmation]) -> dict[str, Any]:
    return {call_id: confirmation.to_dict() for call_id, confirmation in value.items()}


def dump_event(event: Event) -> dict[str, Any]:
    """The ADK-compatible JSON object of ``event``."""
    return unstructure(event)


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""What :func:`dumps` writes with (made once: ``json.dumps`` with options makes one per call)."""

_ENCODE = make_encoder(
    None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, False
)
"""The C encoder of :data:`_ENCODER`, made once (``_ENCODER.encode`` makes one per call); it
keeps no record of the containers it is in, so a cycle recurses until :class:`RecursionError`."""


def json_text(value: Any) -> str:
    """Compact JSON text of ``value`` as :func:`dumps` writes it; raises ``TypeError``,
    ``ValueError`` or ``RecursionError`` (not located) on a value it cannot write."""
    return "".join(_ENCODE(value, 0))


def dumps(obj: Any, *, path: str = "value") -> str:
    """Compact JSON text; :class:`SerializationError` names the first value JSON cannot carry.

    ``path`` names ``obj`` in that error (``Event.to_json`` passes ``"event"``).
    """
    try:
        return json_text(obj)
    except (TypeError, ValueError, RecursionError):
        pass  # written again with cycles detected, to raise as it always did
    try:
        return _ENCODER.encode(obj)
    except (TypeError, ValueError) as exc:
        try:
            check_json_value(obj, path)
        except SerializationError as located:
            message = f"cannot encode as JSON: {located}"
            raise SerializationError(message, path=located.path) from exc
        except RecursionError:  # a container that holds itself
            pass
        raise SerializationError(f"cannot encode as JSON: {exc}", path=path) from exc


# -- in --------------------------------------------------------------------------------------------


def loads(text: str | bytes) -> Any:
    """Parse JSON text (:class:`SerializationError` when it is not JSON).

    ``NaN``, ``Infinity`` and numbers beyond the float range are refused: they are not JSON, and
    :func:`dumps` could not write them back.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (ValueError, TypeError) as exc:
        raise SerializationError(f"invalid JSON: {exc}") from exc
    except RecursionError:
        raise SerializationError(
            f"invalid JSON: nested too deep to parse (at most {MAX_DEPTH} levels are stored)"
        ) from None


def load_stored(text: str | bytes) -> Any:
    """Parse JSON a store holds (no checks: it was checked when written).

    Rows written by older versions may nest deeper than the stack allows here: those are parsed
    with room to spare rather than failing every read of the session, user or app they belong to.
    """
    try:
        return json.loads(text)
    except RecursionError:
        with deeper_stack():
            return json.loads(text)


@contextlib.contextmanager
def deeper_stack() -> Iterator[None]:
    """Allow a few thousand more nested calls while parsing or writing one value."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 4000)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of the float range")
    return value


def structure(data: Any, cls: type[T], path: str = "") -> T:
    """Build a record of type ``cls`` from a JSON object (camelCase or snake_case keys)."""
    if not isinstance(data, Mapping):
        raise SerializationError(
            f"{path or cls.__name__}: expected an object, got {type(data).__name__}", path=path
        )
    kwargs: dict[str, Any] = {}
    for field in _fields(cls):
        raw = data.get(field.camel, data.get(field.name))
        if raw is None:
            continue
        where = f"{path}.{field.camel}" if path else field.camel
        kwargs[field.name] = _load_value(field, raw, where)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"{path or cls.__name__}: {exc}", path=path) from exc


def _load_value(field: _Field, raw: Any, where: str) -> Any:
    kind = field.kind
    if kind == "record":
        assert field.record is not None
        return structure(raw, field.record, where)
    if kind == "records":
        if not isinstance(raw, list):
            raise SerializationError(f"{where}: expected a list", path=where)
        assert field.record is not None
        return [structure(item, field.record, f"{where}[{i}]") for i, item in enumerate(raw)]
    if kind == "bytes":
        return _b64(raw, where)
    if kind == "ids":
        if not isinstance(raw, (list, tuple)) or not all(isinstance(i, str) for i in raw):
            raise SerializationError(f"{where}: expected a list of strings", path=where)
        return frozenset(raw)
    if kind == "payload":
        if not isinstance(raw, Mapping):
            raise SerializationError(f"{where}: expected an object", path=where)
        return dict(raw)
    if kind == "versions":
        return _versions(raw, where)
    if kind == "confirmations":
        return _confirmations(raw, where)
    return _plain(raw, field, where)


def _confirmations(raw: Any, where: str) -> dict[str, ToolConfirmation]:
    """Requested tool confirmations: call id -> ``{"hint", "confirmed", "payload"}``."""
    if not isinstance(raw, Mapping):
        raise SerializationError(f"{where}: expected an object", path=where)
    out: dict[str, ToolConfirmation] = {}
    for call_id, item in raw.items():
        at = f"{where}[{call_id!r}]"
        if not isinstance(item, Mapping):
            raise SerializationError(f"{at}: expected an object", path=at)
        hint, confirmed = item.get("hint", ""), item.get("confirmed", False)
        if not isinstance(hint, str) or not isinstance(confirmed, bool):
            raise SerializationError(
                f"{at}: expected a str 'hint' and a bool 'confirmed', got {dict(item)!r:.80}",
                path=at,
            )
        out[call_id] = ToolConfirmation(hint=hint, confirmed=confirmed, payload=item.get("payload"))
    return out


def _versions(raw: Any, where: str) -> dict[str, int]:
    """An artifact delta: filename -> version (an int)."""
    if not isinstance(raw, Mapping):
        raise SerializationError(f"{where}: expected an object", path=where)
    for name, version in raw.items():
        if not isinstance(version, int) or isinstance(version, bool):
            at = f"{where}[{name!r}]"
            raise SerializationError(
                f"{at}: expected an int version, got {type(version).__name__} {version!r}",
                path=at,
            )
    return dict(raw)


_PLAIN_CHECKS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def _plain(raw: Any, field: _Field, where: str) -> Any:
    hint = field.plain
    check = _PLAIN_CHECKS.get(hint)
    if check is not None and not check(raw):
        raise SerializationError(
            f"{where}: expected {hint}, got {type(raw).__name__} {raw!r}", path=where
        )
    if hint != "float":
        return raw
    try:
        value = float(raw)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise SerializationError(f"{where}: {raw!r:.40} is not a finite number", path=where)
    return value


def _b64(raw: Any, where: str) -> bytes:
    if not isinstance(raw, str):
        raise SerializationError(f"{where}: expected base64 text", path=where)
    try:
        text = raw.replace("-", "+").replace("_", "/")
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SerializationError(f"{where}: invalid base64: {exc}", path=where) from exc


def load_event(data: Mapping[str, Any]) -> Event:
    """Parse an ADK event JSON object."""
    return structure(data, Event)


# -- validation ------------------------------------------------------------------------------------


_FLAT = frozenset({str, int, bool, type(None)})
"""Exact types that are JSON whatever their value (floats are checked for being finite)."""


def is_json_value(value: object) -> bool:
    """Whether ``value`` is plain JSON, as :func:`check_json_value` judges it (no paths built).

    Allowed: None, bool, int, finite float, str, and lists/tuples and str-keyed dicts of those.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        for key, item in value.items():
            if not (isinstance(key, str) and (type(item) in _FLAT or is_json_value(item))):
                return False
        return True
    if isinstance(value, (list, tuple)):
        return all(type(item) in _FLAT or is_json_value(item) for item in value)
    return False


def check_json_value(value: object, path: str) -> None:
    """Raise :class:`SerializationError` naming ``path`` unless ``value`` is plain JSON.

    Allowed: as :func:`is_json_value`. The error names the first offending item in order.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SerializationError(f"{path} is {value!r}, which JSON cannot carry", path=path)
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_json_value(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SerializationError(
                    f"{path} has a non-string key {key!r}", path=f"{path}[{key!r}]"
                )
            check_json_value(item, f"{path}[{key!r}]")
        return
    raise SerializationError(
        f"{path} is a {type(value).__name__} ({value!r:.60}), which cannot be stored as JSON",
        path=path,
    )


# -- storable values -------------------------------------------------------------------------------

MAX_DEPTH = 100
"""How deep a stored value may nest (a list or object counts one level). Deeper values are
refused when stored: every backend and every reader of the JSON must be able to read them back."""


def _text_ok(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogate): O(1) for ASCII text."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(text: str, path: str) -> None:
    """Raise :class:`SerializationError` naming ``path`` if ``text`` holds a lone surrogate."""
    if not _text_ok(text):
        raise SerializationError(_surrogate_message(text, path), path=path)


def check_key(key: str, where: str) -> None:
    """Raise :class:`SerializationError` if the key ``key`` of ``where`` has a lone surrogate."""
    if not _text_ok(key):
        path = f"{where}[{key!r}]"
        raise SerializationError(_surrogate_message(key, f"{path} (the key)"), path=path)


def _surrogate_message(text: str, path: str) -> str:
    index = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
    return (
        f"{path} holds a lone surrogate ({text[index]!r} at index {index}), "
        "which cannot be written as UTF-8"
    )


def _storable(value: object, depth: int) -> bool:
    """The fast test of :func:`check_storable` (no paths built, no generators)."""
    kind = type(value)
    if kind is str:
        return value.isascii() or _text_ok(value)  # type: ignore[attr-defined, arg-type]
    if kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return False
        depth += 1
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                return False
            if not (key.isascii() or _text_ok(key)):
                return False
            if type(item) in _NUMBERS:
                continue
            if not _storable(item, depth):
                return False
        return True
    if isinstance(value, (list, tuple)):
        if depth >= MAX_DEPTH:
            return False
        depth += 1
        for item in value:
            if type(item) not in _NUMBERS and not _storable(item, depth):
                return False
        return True
    if isinstance(value, str):
        return _text_ok(value)
    return is_json_value(value)  # int and float subclasses


_NUMBERS = frozenset((int, bool, type(None)))


def check_storable(value: object, path: str, depth: int = 0) -> None:
    """Raise :class:`SerializationError` naming ``path`` unless ``value`` can be stored.

    Storable: plain JSON (as :func:`check_json_value`) whose strings are valid Unicode (no lone
    surrogate) and that nests at most :data:`MAX_DEPTH` levels, so that every backend writes it and
    reads it back equal. The common case is one quick pass; paths are built only for the error.
    ``depth`` is how deep ``value`` already sits in the stored document.
    """
    if not _storable(value, depth):
        _locate(value, path, depth)


def _locate(value: object, path: str, depth: int) -> None:
    """Raise the error naming the first offending item under ``path``."""
    if isinstance(value, str):
        check_text(value, path)
        return
    if not isinstance(value, (dict, list, tuple)):
        check_json_value(value, path)
        return
    if depth >= MAX_DEPTH:
        raise SerializationError(
            f"{path} nests deeper than {MAX_DEPTH} levels, which cannot be stored", path=path
        )
    if not isinstance(value, dict):
        for index, item in enumerate(value):
            _locate(item, f"{path}[{index}]", depth + 1)
        return
    for key, item in value.items():
        where = f"{path}[{key!r}]"
        if not isinstance(key, str):
            raise SerializationError(f"{path} has a non-string key {key!r}", path=where)
        check_key(key, path)
        _locate(item, where, depth + 1)


def check_event(event: Event, *, delta: bool = True) -> None:
    """Raise :class:`SerializationError` naming the path unless every session backend can store
    ``event`` and read it back equal (its strings valid Unicode, its payloads storable JSON).

    The common event (text or function parts, small payloads) is checked in one quick pass.
    ``delta=False`` leaves the state delta out, for callers that check it with
    :func:`~trio_agents._state.check_state_delta` anyway (the session backends).
    """
    if _event_ok(event) and (
        not delta or not event.actions.state_delta or _storable(event.actions.state_delta, 2)
    ):
        return
    check_storable(unstructure(event), "event")


def _event_ok(event: Event) -> bool:
    """Everything but the state delta (one attribute read per field in the common case)."""
    if not (event.id.isascii() and event.invocation_id.isascii() and event.author.isascii()):
        return False
    branch = event.branch
    if branch is not None and not _text_ok(branch):
        return False
    if event.error_message is not None or event.error_code is not None or event.finish_reason:
        texts = (event.finish_reason, event.error_code, event.error_message)
        if not all(text is None or _text_ok(text) for text in texts):
            return False
    content = event.content
    if content is not None:
        parts = content.parts
        if len(parts) == 1 and (text := parts[0].text) is not None and text.isascii():
            if content.role is not None and not content.role.isascii():
                return False
            if parts[0].function_call is not None or parts[0].function_response is not None:
                return _content_ok(content) and _rest_ok(event)
        elif not _content_ok(content):
            return False
    return _rest_ok(event)


def _rest_ok(event: Event) -> bool:
    metadata = event.custom_metadata
    if metadata and not _storable(metadata, 1):
        return False
    actions = event.actions
    if (
        actions is not NO_ACTIONS  # payloads besides the delta are checked (inline reads first)
        and (
            actions.requested_auth_configs
            or actions.transfer_to_agent is not None
            or actions.artifact_delta
            or actions.agent_state is not None
            or actions.requested_tool_confirmations
        )
        and not _actions_ok(actions)
    ):
        return False
    ids = event.long_running_tool_ids
    return not ids or all(_text_ok(i) for i in ids)


def _actions_ok(actions: EventActions) -> bool:
    """The payloads of ``actions`` but the delta; they sit at depth 2 of an event."""
    configs, target, versions = (
        actions.requested_auth_configs,
        actions.transfer_to_agent,
        actions.artifact_delta,
    )
    if configs and not _storable(configs, 2):
        return False
    if target is not None and not _text_ok(target):
        return False
    if actions.agent_state is not None and not _storable(actions.agent_state, 2):
        return False
    confirmations = actions.requested_tool_confirmations
    if confirmations and not _confirmations_ok(confirmations):
        return False
    return not versions or all(_text_ok(name) for name in versions)


def _confirmations_ok(confirmations: Mapping[str, ToolConfirmation]) -> bool:
    for call_id, confirmation in confirmations.items():
        if not (_text_ok(call_id) and _text_ok(confirmation.hint)):
            return False
        if confirmation.payload is not None and not _storable(confirmation.payload, 3):
            return False
    return True


def _content_ok(content: Content) -> bool:
    """Parts sit at depth 3 of an event (event, content, parts list, part)."""
    role = content.role
    if role is not None and not (role.isascii() or _text_ok(role)):
        return False
    for part in content.parts:
        text = part.text
        if text is not None:
            if not (text.isascii() or _text_ok(text)):
                return False
            continue
        call = part.function_call or part.function_response
        if call is None:
            if not _storable(unstructure(part), 3):
                return False
            continue
        payload = call.args if isinstance(call, FunctionCall) else call.response
        name, call_id = call.name, call.id
        if not (name.isascii() or _text_ok(name)):
            return False
        if call_id is not None and not (call_id.isascii() or _text_ok(call_id)):
            return False
        if payload and not _storable(payload, 5):
            return False
    return True
