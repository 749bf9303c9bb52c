"""Immutable events and their actions.

An :class:`Event` is the unit of session history. Events are frozen; every event, partial chunks
included, has its own id and its own :class:`EventActions`. Change one with ``attrs.evolve``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from ._content import Content, FunctionCall, FunctionResponse, JSONValue
from ._ids import new_event_id, now

__all__ = ["Event", "EventActions", "UsageMetadata", "replace"]


def _dict(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if value is None else dict(value)


def _id_set(value: Iterable[str] | None) -> frozenset[str] | None:
    return None if value is None else frozenset(value)


@attrs.frozen(kw_only=True)
class EventActions:
    """What an event does besides carrying content.

    ``state_delta`` is folded into the session state on commit (``app:``/``user:`` keys into the
    shared scopes, ``temp:`` keys into the live invocation only). ``artifact_delta`` maps an
    artifact filename to the version saved. ``escalate`` ends enclosing loops (and a parallel
    agent when authored by a direct child).
    """

    state_delta: Mapping[str, JSONValue] = attrs.field(factory=dict, converter=_dict)
    artifact_delta: Mapping[str, int] = attrs.field(factory=dict, converter=_dict)
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    skip_summarization: bool | None = None
    requested_auth_configs: Mapping[str, JSONValue] = attrs.field(factory=dict, converter=_dict)

    def is_empty(self) -> bool:
        """True when the actions change nothing."""
        return not (
            self.state_delta
            or self.artifact_delta
            or self.transfer_to_agent
            or self.escalate
            or self.skip_summarization
            or self.requested_auth_configs
        )


_NO_ACTIONS = EventActions()

_T = TypeVar("_T")
_REPLACERS: dict[type, Callable[[Any, Mapping[str, Any]], Any]] = {}


def replace(record: _T, changes: Mapping[str, Any]) -> _T:
    """A copy of a frozen attrs ``record`` with ``changes``, skipping converters and validators.

    Internal fast path for values that are already in normalized form; use ``attrs.evolve``
    everywhere else.
    """
    cls = type(record)
    replacer = _REPLACERS.get(cls)
    if replacer is None:
        replacer = _REPLACERS[cls] = _make_replacer(cls)
    result: _T = replacer(record, changes)
    return result


def _make_replacer(cls: type) -> Callable[[Any, Mapping[str, Any]], Any]:
    lines = ["def replace(record, changes):", "    new = new_(cls)"]
    for field in attrs.fields(cls):
        name = field.name
        lines.append(
            f"    set_(new, {name!r}, changes[{name!r}] if {name!r} in changes else record.{name})"
        )
    lines.append("    return new")
    namespace: dict[str, Any] = {"cls": cls, "new_": object.__new__, "set_": object.__setattr__}
    exec("\n".join(lines), namespace)  # generated once per class, like attrs' own methods
    replacer: Callable[[Any, Mapping[str, Any]], Any] = namespace["replace"]
    return replacer


@attrs.frozen(kw_only=True)
class UsageMetadata:
    """Token counts reported by a model."""

    prompt_token_count: int | None = None
    candidates_token_count: int | None = None
    total_token_count: int | None = None
    cached_content_token_count: int | None = None
    thoughts_token_count: int | None = None
    tool_use_prompt_token_count: int | None = None


@attrs.frozen(kw_only=True)
class Event:
    """One entry of a session's history.

    ``id`` and ``timestamp`` are minted at construction through the injectable providers of
    :mod:`trio_agents._ids`. ``author`` is ``"user"`` or the name of an agent; ``branch`` is the
    dot-separated path of parallel branches the author ran on.
    """

    id: str = attrs.field(factory=new_event_id)
    invocation_id: str = ""
    author: str = ""
    branch: str | None = None
    timestamp: float = attrs.field(factory=now)
    content: Content | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    finish_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    interrupted: bool | None = None
    custom_metadata: Mapping[str, JSONValue] | None = None
    usage_metadata: UsageMetadata | None = None
    long_running_tool_ids: frozenset[str] | None = attrs.field(default=None, converter=_id_set)
    actions: EventActions = _NO_ACTIONS

    # -- queries ---------------------------------------------------------------------------

    def get_function_calls(self) -> list[FunctionCall]:
        """The function calls among the content's parts, in order."""
        content = self.content
        if content is None:
            return []
        return [p.function_call for p in content.parts if p.function_call is not None]

    def get_function_responses(self) -> list[FunctionResponse]:
        """The function responses among the content's parts, in order."""
        content = self.content
        if content is None:
            return []
        return [p.function_response for p in content.parts if p.function_response is not None]

    @property
    def text(self) -> str | None:
        """The concatenated non-thought text of the content, or None."""
        return None if self.content is None else self.content.text

    def is_final_response(self) -> bool:
        """Whether this event is a final, user-facing reply (ADK 2.13, R-FIN-1..3)."""
        if self.actions.skip_summarization or self.long_running_tool_ids:
            return True  # R-FIN-1
        has_calls = bool(self.get_function_calls())
        if self.error_code and not self.partial and not has_calls:
            return True  # R-FIN-2
        return (  # R-FIN-3
            not has_calls
            and not self.get_function_responses()
            and not self.partial
            and not self._ends_with_code_result()
        )

    def _ends_with_code_result(self) -> bool:
        content = self.content
        return bool(content and content.parts and content.parts[-1].code_execution_result)

    # -- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The ADK-compatible JSON object (camelCase keys, ``None`` omitted)."""
        from ._serde import dump_event

        return dump_event(self)

    def to_json(self) -> str:
        """The ADK-compatible JSON text."""
        from ._serde import dumps

        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Event:
        """Parse an event from a JSON object (camelCase or snake_case keys)."""
        from ._serde import load_event

        return load_event(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        """Parse an event from JSON text."""
        from ._serde import loads

        return cls.from_dict(loads(text))
