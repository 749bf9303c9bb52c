"""Immutable events and their actions.

An :class:`Event` is the unit of session history. Events are frozen; every event, partial chunks
included, has its own id and its own :class:`EventActions`. Change one with ``attrs.evolve``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from ._content import EMPTY, Content, FrozenDict, FunctionCall, FunctionResponse, JSONValue
from ._ids import new_event_id, now

__all__ = ["Event", "EventActions", "UsageMetadata", "replace"]


def _dict(value: Mapping[str, Any] | None) -> FrozenDict:
    if value is None or not value:
        return EMPTY
    return value if type(value) is FrozenDict else FrozenDict(value)


def _fresh_if_empty(value: str) -> str:
    return value or new_event_id()


def _id_set(value: Iterable[str] | None) -> frozenset[str] | None:
    return None if value is None else frozenset(value)


@attrs.frozen(kw_only=True, init=False)
class EventActions:
    """What an event does besides carrying content.

    ``state_delta`` is folded into the session state on commit (``app:``/``user:`` keys into the
    shared scopes, ``temp:`` keys into the live invocation only). ``artifact_delta`` maps an
    artifact filename to the version saved. ``escalate`` ends enclosing loops (and a parallel
    agent when authored by a direct child).
    """

    state_delta: Mapping[str, JSONValue] = attrs.field(default=EMPTY, converter=_dict)
    artifact_delta: Mapping[str, int] = attrs.field(default=EMPTY, converter=_dict)
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    skip_summarization: bool | None = None
    requested_auth_configs: Mapping[str, JSONValue] = attrs.field(default=EMPTY, converter=_dict)

    def __init__(
        self,
        *,
        state_delta: Mapping[str, JSONValue] | None = EMPTY,
        artifact_delta: Mapping[str, int] | None = EMPTY,
        transfer_to_agent: str | None = None,
        escalate: bool | None = None,
        skip_summarization: bool | None = None,
        requested_auth_configs: Mapping[str, JSONValue] | None = EMPTY,
    ) -> None:
        # Hand-written for speed (one per emitted event): slot setters, converters inlined.
        _set_state_delta(
            self, state_delta if type(state_delta) is FrozenDict else _dict(state_delta)
        )
        _set_artifact_delta(self, _dict(artifact_delta) if artifact_delta else EMPTY)
        _set_transfer_to_agent(self, transfer_to_agent)
        _set_escalate(self, escalate)
        _set_skip_summarization(self, skip_summarization)
        _set_requested_auth_configs(
            self, _dict(requested_auth_configs) if requested_auth_configs else EMPTY
        )

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


_Setter = Callable[[Any, Any], None]


def _slot_setters(cls: type) -> dict[str, _Setter]:
    """The ``__set__`` of each field's slot: sets a frozen record's field without its checks."""
    return {field.name: cls.__dict__[field.name].__set__ for field in attrs.fields(cls)}


_ACTIONS_SETTERS = _slot_setters(EventActions)
_set_state_delta = _ACTIONS_SETTERS["state_delta"]
_set_artifact_delta = _ACTIONS_SETTERS["artifact_delta"]
_set_transfer_to_agent = _ACTIONS_SETTERS["transfer_to_agent"]
_set_escalate = _ACTIONS_SETTERS["escalate"]
_set_skip_summarization = _ACTIONS_SETTERS["skip_summarization"]
_set_requested_auth_configs = _ACTIONS_SETTERS["requested_auth_configs"]
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
    setters = _slot_setters(cls)
    lines = ["def replace(record, changes):", "    new = new_(cls)"]
    lines += [f"    set_{name}(new, record.{name})" for name in setters]
    lines += ["    for name, value in changes.items():", "        setters[name](new, value)"]
    lines.append("    return new")
    namespace: dict[str, Any] = {"cls": cls, "new_": object.__new__, "setters": setters}
    namespace.update({f"set_{name}": setter for name, setter in setters.items()})
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


@attrs.frozen(kw_only=True, init=False)
class Event:
    """One entry of a session's history.

    ``id`` and ``timestamp`` are minted at construction through the injectable providers of
    :mod:`trio_agents._ids`. ``author`` is ``"user"`` or the name of an agent; ``branch`` is the
    dot-separated path of parallel branches the author ran on.
    """

    id: str = attrs.field(factory=new_event_id, converter=_fresh_if_empty)
    """Unique per event; an empty id is replaced by a fresh one at construction (R-EV-1)."""
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

    def __init__(
        self,
        *,
        id: str = "",
        invocation_id: str = "",
        author: str = "",
        branch: str | None = None,
        timestamp: float | None = None,
        content: Content | None = None,
        partial: bool | None = None,
        turn_complete: bool | None = None,
        finish_reason: str | None = None,
        error_code: str | None = None,
        error_message: str | None = None,
        interrupted: bool | None = None,
        custom_metadata: Mapping[str, JSONValue] | None = None,
        usage_metadata: UsageMetadata | None = None,
        long_running_tool_ids: Iterable[str] | None = None,
        actions: EventActions = _NO_ACTIONS,
    ) -> None:
        # Hand-written for speed (the hot path builds one or two per event): slot setters, the
        # field converters and factories inlined; a missing timestamp is taken now.
        _set_id(self, id or new_event_id())
        _set_invocation_id(self, invocation_id)
        _set_author(self, author)
        _set_branch(self, branch)
        _set_timestamp(self, now() if timestamp is None else timestamp)
        _set_content(self, content)
        _set_partial(self, partial)
        _set_turn_complete(self, turn_complete)
        _set_finish_reason(self, finish_reason)
        _set_error_code(self, error_code)
        _set_error_message(self, error_message)
        _set_interrupted(self, interrupted)
        _set_custom_metadata(self, custom_metadata)
        _set_usage_metadata(self, usage_metadata)
        _set_long_running_tool_ids(self, _id_set(long_running_tool_ids))
        _set_actions(self, actions)

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

        return dumps(self.to_dict(), path="event")

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


_EVENT_SETTERS = _slot_setters(Event)
_set_id = _EVENT_SETTERS["id"]
_set_invocation_id = _EVENT_SETTERS["invocation_id"]
_set_author = _EVENT_SETTERS["author"]
_set_branch = _EVENT_SETTERS["branch"]
_set_timestamp = _EVENT_SETTERS["timestamp"]
_set_content = _EVENT_SETTERS["content"]
_set_partial = _EVENT_SETTERS["partial"]
_set_turn_complete = _EVENT_SETTERS["turn_complete"]
_set_finish_reason = _EVENT_SETTERS["finish_reason"]
_set_error_code = _EVENT_SETTERS["error_code"]
_set_error_message = _EVENT_SETTERS["error_message"]
_set_interrupted = _EVENT_SETTERS["interrupted"]
_set_custom_metadata = _EVENT_SETTERS["custom_metadata"]
_set_usage_metadata = _EVENT_SETTERS["usage_metadata"]
_set_long_running_tool_ids = _EVENT_SETTERS["long_running_tool_ids"]
_set_actions = _EVENT_SETTERS["actions"]
