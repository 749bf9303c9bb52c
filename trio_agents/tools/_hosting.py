"""The Runner's side of toolsets: which scope an invocation's toolsets live in, and closing them.

Under ``async with runner:`` the Runner owns one :class:`ToolsetScope` for its lifetime, so a
toolset's connections (an MCP server's process) are opened once and reused by every
invocation. Without it, an invocation whose agents have toolsets opens a scope around its agents
and closes it (and so its connections) when they are done.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import TYPE_CHECKING

import trio

from ._scope import ToolsetScope, activated, current_scope

if TYPE_CHECKING:
    from ..agents._base import BaseAgent
    from ._toolset import BaseToolset

__all__: list[str] = []  # the Runner's own machinery


class ToolsetHost:
    """The toolsets of a Runner's tree and the scope ``async with runner:`` gives them."""

    __slots__ = ("_root", "_toolsets", "scope")

    def __init__(self, root: BaseAgent) -> None:
        self._root = root
        self._toolsets: list[BaseToolset] | None = None
        self.scope: ToolsetScope | None = None

    @property
    def toolsets(self) -> list[BaseToolset]:
        """The tree's toolsets (looked up once)."""
        if self._toolsets is None:
            from ..agents._models import toolsets_in_use

            self._toolsets = toolsets_in_use(self._root)
        return self._toolsets

    def for_invocation(self) -> _InvocationScope | None:
        """What an invocation enters around its agents: None when the tree has no toolsets.

        The Runner's scope if it has one, else the scope the caller runs in (an agent tool's
        inner run uses its outer run's), else one of the invocation's own.
        """
        if self.scope is None and not self.toolsets:
            return None
        return _InvocationScope(self.scope or current_scope())

    async def open(self) -> None:
        """Open the Runner-wide scope (``async with runner:``)."""
        if self.scope is None:
            scope = ToolsetScope()
            await scope.__aenter__()
            self.scope = scope

    async def close_toolsets(self, per_toolset_timeout: float) -> None:
        """Close every toolset of the tree, each within ``per_toolset_timeout`` seconds."""
        for toolset in self.toolsets:
            with trio.move_on_after(per_toolset_timeout):
                await toolset.close()

    async def leave(self) -> None:
        """Leave the Runner-wide scope, stopping what still runs in it.

        The block's own exception is not handed to the scope: it goes on as it was raised
        (a nursery would wrap it in a group).
        """
        scope, self.scope = self.scope, None
        if scope is not None:  # (no shield here: the nursery's scope must be the innermost)
            await scope.__aexit__(None, None, None)


class _InvocationScope:
    """The Runner-wide scope made current, or a scope of the invocation's own."""

    __slots__ = ("_activation", "_owned", "_shared")

    def __init__(self, shared: ToolsetScope | None) -> None:
        self._shared = shared
        self._owned: ToolsetScope | None = None
        self._activation: contextlib.AbstractContextManager[None] | None = None

    async def __aenter__(self) -> None:
        scope = self._shared
        if scope is None:
            scope = self._owned = ToolsetScope()
            await scope.__aenter__()
        self._activation = activated(scope)
        self._activation.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        assert self._activation is not None
        self._activation.__exit__(exc_type, exc, tb)
        if self._owned is not None:  # the agents' own exception goes on as raised (no group)
            await self._owned.__aexit__(None, None, None)
        return False
