"""Test doubles for agent tests: deterministic models and fixed id/clock providers.

Nothing here touches the network. Import it in your tests::

    from trio_agents.testing import ScriptedModel

    model = ScriptedModel(["Hello!"])          # one entry per model call
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TypeAlias

import attrs
import trio

from .._content import Content
from .._errors import ModelError
from .._ids import use_clock, use_id_provider
from ..models._base import LlmRequest, LlmResponse, Model

__all__ = ["ScriptedModel", "fixed_clock", "sequential_ids"]

Reply: TypeAlias = LlmResponse | str | BaseException
Entry: TypeAlias = Reply | Sequence[LlmResponse | str]
Handler: TypeAlias = Callable[[LlmRequest], "Entry | Awaitable[Entry]"]


def _as_response(reply: LlmResponse | str) -> LlmResponse:
    if isinstance(reply, str):
        return LlmResponse(content=Content.from_text(reply, role="model"), finish_reason="STOP")
    if isinstance(reply, LlmResponse):
        return reply
    raise TypeError(f"a script entry must be an LlmResponse or a str, got {reply!r}")


class ScriptedModel(Model):
    """A model that answers from a script, for deterministic agent tests.

    ``script`` is either a list with one entry per model call, or a (sync or async)
    ``handler(request)`` returning an entry. An entry is:

    * a ``str``: a final text answer;
    * an :class:`~trio_agents.models.LlmResponse`: returned as it is;
    * a list of those: streamed as chunks in SSE mode (all but the last are marked partial; the
      last is the final aggregate); without streaming only the last one is returned;
    * an exception instance: raised by the call.

    Every request received is recorded in :attr:`requests`, in order.
    """

    def __init__(self, script: Sequence[Entry] | Handler, *, model: str = "scripted") -> None:
        self.model = model
        self.requests: list[LlmRequest] = []
        self._handler: Handler | None = script if callable(script) else None
        self._script: list[Entry] = [] if callable(script) else list(script)
        self._next = 0

    async def _entry(self, request: LlmRequest) -> Entry:
        await trio.lowlevel.checkpoint()
        self.requests.append(attrs.evolve(request, contents=list(request.contents)))
        if self._handler is not None:
            result = self._handler(request)
            return await result if inspect.isawaitable(result) else result
        if self._next >= len(self._script):
            raise ModelError(
                f"ScriptedModel {self.model!r} has {len(self._script)} entries but was called "
                f"{self._next + 1} times"
            )
        entry = self._script[self._next]
        self._next += 1
        return entry

    @staticmethod
    def _chunks(entry: Entry) -> list[LlmResponse]:
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, (str, LlmResponse)):
            return [_as_response(entry)]
        chunks = [_as_response(e) for e in entry]
        if not chunks:
            raise TypeError("a streamed script entry needs at least one chunk")
        marked = [
            c if c.partial is not None else attrs.evolve(c, partial=True) for c in chunks[:-1]
        ]
        return [*marked, attrs.evolve(chunks[-1], partial=False)]

    async def generate(self, request: LlmRequest) -> LlmResponse:
        return self._chunks(await self._entry(request))[-1]

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.MemoryReceiveChannel[LlmResponse]]:
        chunks = self._chunks(await self._entry(request))
        send, receive = trio.open_memory_channel[LlmResponse](len(chunks))
        with send:
            for chunk in chunks:
                send.send_nowait(chunk)
        with receive:
            yield receive


@contextlib.contextmanager
def sequential_ids(prefix: str = "id") -> Iterator[None]:
    """Mint ids ``<prefix>-1``, ``<prefix>-2``, ... inside the block (reproducible runs)."""
    counter = itertools.count(1)
    with use_id_provider(lambda: f"{prefix}-{next(counter)}"):
        yield


@contextlib.contextmanager
def fixed_clock(start: float = 1_700_000_000.0, step: float = 0.001) -> Iterator[None]:
    """Timestamps ``start``, ``start + step``, ... inside the block (reproducible runs)."""
    counter = itertools.count()
    with use_clock(lambda: start + step * next(counter)):
        yield
