"""One line per failure: what a person at a terminal reads when a command cannot go on."""

from __future__ import annotations

import errno
from collections.abc import Iterator

import trio

from .._errors import TrioAgentsError

__all__ = ["one_line"]


def one_line(exc: BaseException) -> str:
    """``exc`` (or the failures an exception group holds) described on a single line."""
    leaves = [leaf for leaf in _leaves(exc) if not isinstance(leaf, trio.Cancelled)] or [exc]
    text = _describe(leaves[0])
    if len(leaves) > 1:
        text += f" (and {len(leaves) - 1} more failures)"
    return text


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"address already in use: {exc.strerror or exc}"
    message = " ".join(str(exc).split()) or "(no message)"
    if isinstance(exc, TrioAgentsError):
        return f"{type(exc).__name__}: {message}"
    return f"{type(exc).__name__}: {message} (--debug shows the traceback)"
