"""Injectable id and clock providers.

Every event id, invocation id and timestamp goes through these functions. Tests make runs
reproducible with :func:`use_id_provider` / :func:`use_clock` (context managers over context
variables, so one setting covers every task the run starts) or with the fixed providers in
:mod:`trio_agents.testing`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Callable, Iterator

__all__ = [
    "new_event_id",
    "new_function_call_id",
    "new_invocation_id",
    "new_session_id",
    "now",
    "use_clock",
    "use_id_provider",
]

IdProvider = Callable[[], str]
Clock = Callable[[], float]


def _uuid4() -> str:
    """A random (version 4) UUID string, formatted without building a ``uuid.UUID``."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_id_provider: contextvars.ContextVar[IdProvider] = contextvars.ContextVar(
    "trio_agents_id_provider", default=_uuid4
)
_clock: contextvars.ContextVar[Clock] = contextvars.ContextVar(
    "trio_agents_clock", default=time.time
)


def new_event_id() -> str:
    """A fresh event id (a uuid4 string by default)."""
    return _id_provider.get()()


def new_session_id() -> str:
    """A fresh session id (a uuid4 string by default)."""
    return _id_provider.get()()


def new_invocation_id() -> str:
    """A fresh invocation id, ``e-<id>`` as in ADK."""
    return "e-" + _id_provider.get()()


def new_function_call_id() -> str:
    """A fresh client-side function-call id, ``adk-<id>`` as in ADK."""
    return "adk-" + _id_provider.get()()


def now() -> float:
    """The current time in epoch seconds, from the active clock."""
    return _clock.get()()


@contextlib.contextmanager
def use_id_provider(provider: IdProvider) -> Iterator[None]:
    """Use ``provider()`` for every id minted inside the block (and tasks started in it)."""
    token = _id_provider.set(provider)
    try:
        yield
    finally:
        _id_provider.reset(token)


@contextlib.contextmanager
def use_clock(clock: Clock) -> Iterator[None]:
    """Use ``clock()`` for every timestamp taken inside the block (and tasks started in it)."""
    token = _clock.set(clock)
    try:
        yield
    finally:
        _clock.reset(token)
