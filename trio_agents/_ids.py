"""Injectable id and clock providers.

Every event id, invocation id and timestamp goes through these functions. Tests make runs
reproducible with :func:`use_id_provider` / :func:`use_clock` (context managers over context
variables, so one setting covers every task the run starts) or with the fixed providers in
:mod:`trio_agents.testing`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import os
import time
import uuid
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


class _EventIds:
    """Version-4 UUID strings for events, about ten times cheaper than ``uuid.uuid4()``.

    Event ids need uniqueness, not secrecy: each process draws 74 random bits once (the first
    24 characters) and a random 47-bit start for a 48-bit counter (the last 12). Ids of one
    process never repeat (2**47 ids before the counter could wrap); ids of two processes collide
    only if their random prefixes do. A forked child draws again. ``next_id`` is a C-level call
    (a ``map`` over a counter), with no Python frame. Session ids, which may be shown to
    clients, stay fully random (``uuid4``).
    """

    __slots__ = ("next_id",)

    def __init__(self) -> None:
        self.next_id: Callable[[], str] = str
        self.reseed()

    def reseed(self) -> None:
        bits = int.from_bytes(os.urandom(16))
        high, mid, version, variant = bits >> 96, (bits >> 80) & 0xFFFF, bits >> 68, bits >> 48
        prefix = f"{high:08x}-{mid:04x}-4{version & 0xFFF:03x}-{0x8000 | variant & 0x3FFF:04x}-"
        ids = map(f"{prefix}%012x".__mod__, itertools.count(bits & 0x7FFF_FFFF_FFFF))
        self.next_id = functools.partial(next, ids)

    def __call__(self) -> str:
        return self.next_id()


_uuid4 = _EventIds()
os.register_at_fork(after_in_child=_uuid4.reseed)  # a forked child draws fresh ids


def _random_uuid4() -> str:
    """A version-4 UUID from the OS's random source (for ids that should not be guessable)."""
    return str(uuid.uuid4())


_id_provider: contextvars.ContextVar[IdProvider | None] = contextvars.ContextVar(
    "trio_agents_id_provider", default=None
)
"""The provider set by :func:`use_id_provider`; None means the default (``_uuid4``)."""
_clock: contextvars.ContextVar[Clock] = contextvars.ContextVar(
    "trio_agents_clock", default=time.time
)


def new_event_id() -> str:
    """A fresh event id (a uuid4 string by default)."""
    provider = _id_provider.get()
    return _uuid4.next_id() if provider is None else provider()


def new_session_id() -> str:
    """A fresh session id (by default a uuid4 string from the OS's random source)."""
    provider = _id_provider.get()
    return _random_uuid4() if provider is None else provider()


def new_invocation_id() -> str:
    """A fresh invocation id, ``e-<id>`` as in ADK."""
    return "e-" + new_event_id()


def new_function_call_id() -> str:
    """A fresh client-side function-call id, ``adk-<id>`` as in ADK."""
    return "adk-" + new_event_id()


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
