"""Memory: what agents can recall from a user's past sessions."""

from __future__ import annotations

from .._exports import publish as _publish
from ._base import (
    MemoryEntry as MemoryEntry,
    MemoryService as MemoryService,
    SearchMemoryResponse as SearchMemoryResponse,
)
from ._memory import InMemoryMemoryService as InMemoryMemoryService
from ._sqlite import SqliteMemoryService as SqliteMemoryService

__all__ = [
    "InMemoryMemoryService",
    "MemoryEntry",
    "MemoryService",
    "SearchMemoryResponse",
    "SqliteMemoryService",
]

_publish(__name__, globals(), __all__)
