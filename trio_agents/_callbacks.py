"""Callback chains: one callable or a list, sync or async, first non-None result wins."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from ._errors import ConfigurationError

__all__ = ["Callback", "CallbackSpec", "callback_chain", "run_callback_chain"]

Callback: TypeAlias = Callable[..., Any]
CallbackSpec: TypeAlias = Callback | Sequence[Callback] | None


def callback_chain(
    value: CallbackSpec, *, owner: str, field: str, params: Sequence[str]
) -> tuple[Callback, ...]:
    """Normalize ``value`` to a tuple, checking each callable accepts ``params`` by keyword."""
    if value is None:
        return ()
    chain = (value,) if callable(value) else tuple(value)
    for cb in chain:
        _check_signature(cb, owner=owner, field=field, params=params)
    return chain


def _check_signature(cb: object, *, owner: str, field: str, params: Sequence[str]) -> None:
    if not callable(cb):
        raise ConfigurationError(f"{owner}: {field} must be callable, got {cb!r}")
    try:
        signature = inspect.signature(cb)
    except (TypeError, ValueError):  # builtins without a signature: trust them
        return
    try:
        signature.bind(**dict.fromkeys(params))
    except TypeError as exc:
        wanted = ", ".join(params)
        raise ConfigurationError(
            f"{owner}: {field} {getattr(cb, '__qualname__', cb)!r} must accept the keyword "
            f"arguments ({wanted}): {exc}"
        ) from exc


async def plugins_then_chain(
    plugin_answer: Awaitable[Any] | None, chain: Sequence[Callback], /, **kwargs: Any
) -> Any:
    """The plugins' answer (``plugin_answer``, the awaitable of their hook, or None when there
    are no plugins), else the answer of the agent's callback ``chain`` called with ``kwargs``:
    the first non-None answer wins, as ADK consults plugins before the agent's own callbacks."""
    answer = await plugin_answer if plugin_answer is not None else None
    if answer is None and chain:
        answer = await run_callback_chain(chain, **kwargs)
    return answer


async def run_callback_chain(chain: Sequence[Callback], /, **kwargs: Any) -> Any:
    """Call each callback with ``kwargs`` until one returns non-None; return that result."""
    for cb in chain:
        result = cb(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            return result
    return None
