"""Artifacts: versioned files attached to sessions (or shared by a user's sessions)."""

from __future__ import annotations

from .._exports import publish as _publish
from ._base import ArtifactService as ArtifactService, ArtifactVersion as ArtifactVersion
from ._file import FileArtifactService as FileArtifactService
from ._memory import InMemoryArtifactService as InMemoryArtifactService

__all__ = ["ArtifactService", "ArtifactVersion", "FileArtifactService", "InMemoryArtifactService"]

_publish(__name__, globals(), __all__)
