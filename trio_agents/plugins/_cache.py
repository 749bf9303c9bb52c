"""ResponseCachePlugin: answer a repeated model request from memory.

The key is a SHA-256 of the request's canonical JSON: model, system instruction, contents, tool
declarations, generation config and response schema (``labels`` are left out). Entries live in
an LRU of ``max_entries`` and expire ``ttl`` seconds after they were stored (``trio.current_time``,
so tests under a mock clock are exact). Only complete answers are stored: not partial, no error,
not interrupted, with content.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._errors import ConfigurationError, SerializationError
from ..models._base import LlmRequest, LlmResponse
from ..models._request_key import request_key
from ._base import BasePlugin

if TYPE_CHECKING:
    from .._context import CallbackContext, InvocationContext

__all__ = ["CacheStats", "ResponseCachePlugin"]


@attrs.frozen(kw_only=True)
class CacheStats:
    """Counters of a :class:`ResponseCachePlugin`."""

    hits: int
    misses: int
    stores: int
    evictions: int
    """Entries dropped because the cache was full."""
    expirations: int
    """Entries dropped because they were older than the TTL."""
    uncacheable: int
    """Requests that could not be keyed (a value that is not JSON)."""
    entries: int
    pending: int
    """Model calls that missed and whose answer has not arrived yet."""


@attrs.define
class _Entry:
    response: LlmResponse
    expires: float


class ResponseCachePlugin(BasePlugin):
    """A ``before_model`` cache: a hit answers without calling the model (and skips the
    after-model hooks, as any ``before_model`` answer does).

    Register it after plugins that must see every model call and before :class:`MetricsPlugin`
    if hits should not count as model calls. The cache is shared by every user and session that
    sends the same request; use one instance per trust domain.
    """

    def __init__(
        self,
        name: str = "response_cache",
        *,
        max_entries: int = 1024,
        ttl: float | None = 300.0,
    ) -> None:
        super().__init__(name)
        if max_entries < 1:
            raise ConfigurationError(f"max_entries must be at least 1, got {max_entries}")
        if ttl is not None and not ttl > 0:
            raise ConfigurationError(f"ttl must be positive or None, got {ttl}")
        self.max_entries = max_entries
        self.ttl = ttl
        self._entries: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._pending: dict[str, dict[int, tuple[object, str]]] = {}
        self._hits = self._misses = self._stores = 0
        self._evictions = self._expirations = self._uncacheable = 0

    def stats(self) -> CacheStats:
        """The counters so far and the current number of entries."""
        return CacheStats(
            hits=self._hits,
            misses=self._misses,
            stores=self._stores,
            evictions=self._evictions,
            expirations=self._expirations,
            uncacheable=self._uncacheable,
            entries=len(self._entries),
            pending=sum(len(p) for p in self._pending.values()),
        )

    def clear(self) -> None:
        """Drop every entry (counters are kept)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    # -- hooks -------------------------------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        try:
            key = request_key(llm_request)
        except SerializationError:
            self._uncacheable += 1
            return None
        entry = self._entries.get(key)
        if entry is not None:
            if trio.current_time() < entry.expires:
                self._entries.move_to_end(key)
                self._hits += 1
                return entry.response
            del self._entries[key]
            self._expirations += 1
        self._misses += 1
        pending = self._pending.setdefault(callback_context.invocation_id, {})
        pending[id(callback_context)] = (callback_context, key)
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> None:
        if getattr(llm_response, "partial", None):
            return  # streamed chunk: wait for the aggregate
        key = self._take(callback_context)
        if key is not None and _complete(llm_response):
            self._store(key, _without_call_ids(llm_response))

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> None:
        self._take(callback_context)  # a recovery answer is not the model's: never stored

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self._pending.pop(invocation_context.invocation_id, None)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        self._pending.pop(invocation_context.invocation_id, None)

    # -- internals ---------------------------------------------------------------------------------

    def _take(self, cc: CallbackContext) -> str | None:
        pending = self._pending.get(cc.invocation_id)
        if pending is None:
            return None
        found = pending.pop(id(cc), None)
        if not pending:
            del self._pending[cc.invocation_id]
        return found[1] if found is not None else None

    def _store(self, key: str, response: LlmResponse) -> None:
        expires = trio.current_time() + self.ttl if self.ttl is not None else float("inf")
        self._entries[key] = _Entry(response, expires)
        self._entries.move_to_end(key)
        self._stores += 1
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
            self._evictions += 1


def _complete(response: Any) -> bool:
    return (
        isinstance(response, LlmResponse)
        and response.content is not None
        and not response.partial
        and response.turn_complete is not False
        and not response.error_code
        and not response.interrupted
        and response.finish_reason in (None, "STOP")
    )


def _without_call_ids(response: LlmResponse) -> LlmResponse:
    """Replayed function calls get fresh ids: a call id is never reused across turns."""
    content = response.content
    if content is None or not any(p.function_call and p.function_call.id for p in content.parts):
        return response
    parts = [
        attrs.evolve(p, function_call=attrs.evolve(p.function_call, id=None))
        if p.function_call is not None
        else p
        for p in content.parts
    ]
    return attrs.evolve(response, content=attrs.evolve(content, parts=parts))
