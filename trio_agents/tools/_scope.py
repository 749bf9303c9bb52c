"""Where toolsets keep long-lived tasks (an MCP server's session): a nursery someone owns.

A :class:`ToolsetScope` is a nursery plus the closers of what was started in it. The Runner
opens one for its lifetime under ``async with runner:``; otherwise an invocation whose agents
use toolsets opens one around its agents and closes it when they are done. Toolsets find the
scope they run in with :func:`current_scope` (None: no scope, so each operation opens and closes
its own connection).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import Self

import trio

__all__ = ["ToolsetScope", "current_scope"]

_CURRENT: ContextVar[ToolsetScope | None] = ContextVar("trio_agents_toolset_scope", default=None)


class ToolsetScope:
    """A nursery that holds toolsets' long-lived tasks; leaving it stops them and waits.

    Tasks started in :attr:`nursery` must not raise (a failure would cancel the owner's block):
    they record failures for their toolset instead. Each registers a closer with
    :meth:`on_close`; leaving the scope calls every closer, then waits for the tasks to finish.
    """

    def __init__(self) -> None:
        self._manager = trio.open_nursery()
        self._nursery: trio.Nursery | None = None
        self._closers: list[Callable[[], None]] = []

    @property
    def nursery(self) -> trio.Nursery:
        """The nursery toolsets start their connection tasks in (only while open)."""
        if self._nursery is None:
            raise RuntimeError("the toolset scope is not open")
        return self._nursery

    @property
    def is_open(self) -> bool:
        """Whether the scope is open (its nursery accepts tasks)."""
        return self._nursery is not None

    def on_close(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` (which must not block) when the scope is left."""
        self._closers.append(closer)

    async def __aenter__(self) -> Self:
        self._nursery = await self._manager.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        closers, self._closers = self._closers, []
        self._nursery = None
        for closer in closers:
            closer()
        return bool(await self._manager.__aexit__(exc_type, exc, tb))


def current_scope() -> ToolsetScope | None:
    """The toolset scope the calling task runs in, if any."""
    scope = _CURRENT.get()
    return scope if scope is not None and scope.is_open else None


@contextlib.contextmanager
def activated(scope: ToolsetScope) -> Iterator[None]:
    """Make ``scope`` the current one for the calling task (and the tasks it starts)."""
    token = _CURRENT.set(scope)
    try:
        yield
    finally:
        _CURRENT.reset(token)
