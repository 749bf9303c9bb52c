"""Immutable events and their actions.

An :class:`Event` is the unit of session history. Events are frozen; every event, partial chunks
included, has its own id and its own :class:`EventActions`. Change one with ``attrs.evolve``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from ._content import EMPTY, Content, FrozenDict, FunctionCall, FunctionResponse, JSONValue
from ._errors import ConfigurationError
from ._ids import new_event_id, now
from ._tool_confirmation import ToolConfirmation

__all__ = ["Event", "EventActions", "UsageMetadata", "replace", "stamped"]


def _dict(value: Mapping[str, Any] | None) -> FrozenDict:
    if value is None or not value:
        return EMPTY
    return value if type(value) is FrozenDict else FrozenDict(value)


def _optional_dict(value: Mapping[str, Any] | None) -> FrozenDict | None:
    return None if value is None else _dict(value)


def _confirmations(value: Mapping[str, ToolConfirmation] | None) -> FrozenDict:
    if not value:
        return EMPTY
    for call_id, confirmation in value.items():
        if not isinstance(confirmation, ToolConfirmation):
            raise ConfigurationError(
                f"requested_tool_confirmations[{call_id!r}] must be a ToolConfirmation, "
                f"got {type(confirmation).__name__}"
            )
    return _dict(value)


def _fresh_if_empty(value: str) -> str:
    return value or new_event_id()


def _id_set(value: Iterable[str] | None) -> frozenset[str] | None:
    return None if value is None else frozenset(value)


@attrs.frozen(kw_only=True, init=False, weakref_slot=False)
class EventActions:
    """What an event does besides carrying content.

    ``state_delta`` is folded into the session state on commit (``app:``/``user:`` keys into the
    shared scopes, ``temp:`` keys into the live invocation only). ``artifact_delta`` maps an
    artifact filename to the version saved. ``escalate`` ends enclosing loops (and a parallel
    agent when authored by a direct child). ``requested_tool_confirmations`` maps a function
    call id to the :class:`~trio_agents.ToolConfirmation` its tool asked for. ``agent_state`` and
    ``end_of_agent`` are a workflow agent's checkpoint: where it stands, and that it has finished.
    """

    state_delta: Mapping[str, JSONValue] = attrs.field(default=EMPTY, converter=_dict)
    artifact_delta: Mapping[str, int] = attrs.field(default=EMPTY, converter=_dict)
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    skip_summarization: bool | None = None
    requested_auth_configs: Mapping[str, JSONValue] = attrs.field(default=EMPTY, converter=_dict)
    requested_tool_confirmations: Mapping[str, ToolConfirmation] = attrs.field(
        default=EMPTY, converter=_confirmations
    )
    end_of_agent: bool | None = None
    agent_state: Mapping[str, JSONValue] | None = attrs.field(
        default=None, converter=_optional_dict
    )

    def __init__(
        self,
        *,
        state_delta: Mapping[str, JSONValue] | None = EMPTY,
        artifact_delta: Mapping[str, int] | None = EMPTY,
        transfer_to_agent: str | None = None,
        escalate: bool | None = None,
        skip_summarization: bool | None = None,
        requested_auth_configs: Mapping[str, JSONValue] | None = EMPTY,
        requested_tool_confirmations: Mapping[str, ToolConfirmation] | None = EMPTY,
        end_of_agent: bool | None = None,
        agent_state: Mapping[str, JSONValue] | None = None,
    ) -> None:
        # Hand-written for speed (one per emitted event): converters inlined, fields stored on
        # the draft twin (see _Drafts).
        draft: Any = _ACTIONS.open(self)
        draft.state_delta = state_delta if type(state_delta) is FrozenDict else _dict(state_delta)
        draft.artifact_delta = _dict(artifact_delta) if artifact_delta else EMPTY
        draft.transfer_to_agent = transfer_to_agent
        draft.escalate = escalate
        draft.skip_summarization = skip_summarization
        draft.requested_auth_configs = (
            _dict(requested_auth_configs) if requested_auth_configs else EMPTY
        )
        draft.requested_tool_confirmations = (
            _confirmations(requested_tool_confirmations) if requested_tool_confirmations else EMPTY
        )
        draft.end_of_agent = end_of_agent
        draft.agent_state = None if agent_state is None else _dict(agent_state)
        draft.__class__ = EventActions

    def is_empty(self) -> bool:
        """True when the actions change nothing."""
        return not (
            self.state_delta
            or self.artifact_delta
            or self.transfer_to_agent
            or self.escalate
            or self.skip_summarization
            or self.requested_auth_configs
            or self.requested_tool_confirmations
            or self.end_of_agent is not None
            or self.agent_state is not None
        )


class _Drafts:
    """Fast construction of a frozen, slotted attrs class ``cls``.

    A frozen class refuses attribute stores, so setting its fields one by one costs a descriptor
    call each. Its *draft* is a plain class with the same slots: an instance is switched to the
    draft (``open``), its fields are set with ordinary stores, and it is switched back by
    assigning ``__class__``. CPython allows the switch because both classes have the same slot
    layout (which is why the hot records have no ``__weakref__`` slot). Three to six times
    cheaper than the checked path, for records built once or twice per event.
    """

    __slots__ = ("draft", "open")

    def __init__(self, cls: type) -> None:
        self.draft = type(f"_{cls.__name__}Draft", (), {"__slots__": cls.__dict__["__slots__"]})
        set_class = object.__dict__["__class__"].__set__
        draft = self.draft

        def open_(record: Any) -> Any:
            set_class(record, draft)
            return record

        self.open = open_


_ACTIONS = _Drafts(EventActions)
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
    drafts = _DRAFTS.get(cls) or _Drafts(cls)
    names = [field.name for field in attrs.fields(cls)]
    lines = ["def replace(record, changes):", "    new = new_(draft)"]
    lines += [f"    new.{name} = record.{name}" for name in names]
    lines += ["    for name, value in changes.items():", "        setattr(new, name, value)"]
    lines += ["    new.__class__ = cls", "    return new"]
    namespace: dict[str, Any] = {"cls": cls, "new_": object.__new__, "draft": drafts.draft}
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


@attrs.frozen(kw_only=True, init=False, weakref_slot=False)
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
        # Hand-written for speed (the hot path builds one or two per event): the field converters
        # and factories inlined, fields stored on the draft twin (see _Drafts); a missing
        # timestamp is taken now.
        draft: Any = _EVENTS.open(self)
        draft.id = id or new_event_id()
        draft.invocation_id = invocation_id
        draft.author = author
        draft.branch = branch
        draft.timestamp = now() if timestamp is None else timestamp
        draft.content = content
        draft.partial = partial
        draft.turn_complete = turn_complete
        draft.finish_reason = finish_reason
        draft.error_code = error_code
        draft.error_message = error_message
        draft.interrupted = interrupted
        draft.custom_metadata = custom_metadata
        draft.usage_metadata = usage_metadata
        draft.long_running_tool_ids = _id_set(long_running_tool_ids)
        draft.actions = actions
        draft.__class__ = Event

    @staticmethod
    def new_id() -> str:
        """A fresh event id, as an event built without one gets (a uuid4 string by default)."""
        return new_event_id()

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

    def has_trailing_code_execution_result(self) -> bool:
        """Whether the content's last part is a code-execution result (as google-adk's)."""
        return self._ends_with_code_result()

    # -- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The ADK-compatible JSON object (camelCase keys, ``None`` omitted)."""
        from ._serde import dump_event

        return dump_event(self)

    def to_json(self) -> str:
        """The ADK-compatible JSON text (the text of :meth:`to_dict`)."""
        from ._serde_text import event_text

        return event_text(self)

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


_EVENTS = _Drafts(Event)
_DRAFTS: dict[type, _Drafts] = {Event: _EVENTS, EventActions: _ACTIONS}


def _make_stamper() -> Callable[[Event, str, str, str | None], Event]:
    filled = {
        "author": "record.author or author",
        "invocation_id": "record.invocation_id or invocation_id",
        "branch": "branch if record.branch is None else record.branch",
    }
    lines = ["def stamped(record, author, invocation_id, branch):", "    new = new_(draft)"]
    for field in attrs.fields(Event):
        lines.append(f"    new.{field.name} = {filled.get(field.name, f'record.{field.name}')}")
    lines += ["    new.__class__ = cls", "    return new"]
    namespace: dict[str, Any] = {"cls": Event, "new_": object.__new__, "draft": _EVENTS.draft}
    exec("\n".join(lines), namespace)  # generated once, like attrs' own methods
    stamper: Callable[[Event, str, str, str | None], Event] = namespace["stamped"]
    return stamper


stamped = _make_stamper()
"""``stamped(event, author, invocation_id, branch)``: a copy of ``event`` with those three
filled in where ``event`` has none (the emit path's stamp, one pass over the fields)."""
