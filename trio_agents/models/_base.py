"""The model interface: requests, responses, ``generate`` and ``stream``, and the registry."""

from __future__ import annotations

import abc
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from .._content import Content, JSONValue
from .._errors import ConfigurationError
from .._events import UsageMetadata

__all__ = [
    "FunctionDeclaration",
    "LlmRequest",
    "LlmResponse",
    "Model",
    "register_model",
    "resolve_model",
]


@attrs.frozen(kw_only=True)
class FunctionDeclaration:
    """A tool as the model sees it: a name, a description and a JSON schema of parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, JSONValue] | None = None


@attrs.define(kw_only=True)
class LlmRequest:
    """One model call. Mutable, as in ADK: before-model callbacks may edit it in place."""

    model: str | None = None
    contents: list[Content] = attrs.field(factory=list)
    system_instruction: str | None = None
    tools: list[FunctionDeclaration] = attrs.field(factory=list)
    generation_config: dict[str, Any] = attrs.field(factory=dict)
    """Provider options such as ``temperature`` or ``max_output_tokens``."""
    response_schema: Mapping[str, JSONValue] | None = None
    """A JSON schema the answer must follow (``output_schema``); implies JSON output."""
    labels: dict[str, str] = attrs.field(factory=dict)

    def append_instructions(self, *instructions: str | Sequence[str]) -> None:
        """Append to the system instruction, pieces joined by blank lines (R-TPL-2).

        Takes the pieces as arguments, or as one list (``append_instructions(["..."])``, as
        ADK's request takes them).
        """
        pieces = [self.system_instruction] if self.system_instruction else []
        for given in instructions:
            pieces.extend([given] if isinstance(given, str) else given)
        pieces = [p for p in pieces if p]
        self.system_instruction = "\n\n".join(pieces) if pieces else None


@attrs.frozen(kw_only=True)
class LlmResponse:
    """What a model answered (or one streamed chunk of it)."""

    content: Content | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    finish_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    interrupted: bool | None = None
    custom_metadata: Mapping[str, JSONValue] | None = None
    usage_metadata: UsageMetadata | None = None
    model_version: str | None = None


class Model(abc.ABC):
    """A language model.

    Implement :meth:`generate`; override :meth:`stream` for real streaming (the default streams
    the whole answer as one final chunk). Models that own resources (HTTP clients) release them in
    :meth:`aclose`.
    """

    model: str = ""

    @abc.abstractmethod
    async def generate(self, request: LlmRequest) -> LlmResponse:
        """One complete, non-partial answer to ``request``."""

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[LlmResponse]]:
        """A channel of partial chunks followed by the final aggregate (``partial`` not True)."""
        response = await self.generate(request)
        send, receive = trio.open_memory_channel[LlmResponse](1)
        with send, receive:
            send.send_nowait(response)
            send.close()
            yield receive

    async def aclose(self) -> None:
        """Release resources (a no-op by default)."""
        await trio.lowlevel.checkpoint()


ModelFactory = Callable[[str], Model]
_REGISTRY: list[tuple[re.Pattern[str], ModelFactory]] = []


def register_model(pattern: str, factory: ModelFactory) -> None:
    """Resolve model names matching the regular expression ``pattern`` with ``factory(name)``.

    Later registrations win over earlier ones.
    """
    _REGISTRY.insert(0, (re.compile(pattern), factory))


def resolve_model(name: str) -> Model:
    """The model for ``name`` (e.g. ``"gemini-2.5-flash"``, ``"openai/gpt-4o"``)."""
    for pattern, factory in _REGISTRY:
        if pattern.fullmatch(name):
            return factory(name)
    raise ConfigurationError(f"no model is registered for the name {name!r}")
