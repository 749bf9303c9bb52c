"""Public names report the public module they are exported from, not the private one.

``trio_agents.sessions._sqlite.SqliteSessionService`` reads as
``trio_agents.sessions.SqliteSessionService`` in reprs, tracebacks and documentation. When a name
is exported from several namespaces, the most public one wins (``trio_agents`` over
``trio_agents.tools``), whatever order the packages are imported in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

import attrs

__all__ = ["publish", "publish_one"]


def publish(namespace: str, members: Mapping[str, object], names: Iterable[str]) -> None:
    """Make each of ``names`` found in ``members`` (a module's globals) report ``namespace``.

    Names a module loads lazily are not in ``members`` yet: pass each to :func:`publish_one`
    when it is loaded.
    """
    for name in names:
        if name in members:
            publish_one(namespace, members[name])


def publish_one(namespace: str, obj: object) -> None:
    """Make ``obj`` report ``namespace`` as its module, unless a more public one already does."""
    current = getattr(obj, "__module__", None)
    if not isinstance(current, str) or not _replaces(namespace, current):
        return
    if isinstance(obj, type) and attrs.has(obj):
        attrs.resolve_types(obj)  # resolve string annotations while the module is right
    with contextlib.suppress(AttributeError, TypeError):
        obj.__module__ = namespace


def _replaces(namespace: str, current: str) -> bool:
    """Whether ``namespace`` is a better home than ``current``: ours, and more public."""
    if current.partition(".")[0] != namespace.partition(".")[0] or current == namespace:
        return False
    private = any(part.startswith("_") for part in current.split("."))
    return private or current.startswith(namespace + ".")
