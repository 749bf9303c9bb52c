"""The artifact-service interface: versioned files per session (or per user)."""

from __future__ import annotations

import abc

from .._content import Part
from .._errors import ConfigurationError

__all__ = ["USER_PREFIX", "ArtifactService", "check_filename"]

USER_PREFIX = "user:"


def check_filename(filename: object) -> str:
    """Return ``filename`` if usable, else raise :class:`ConfigurationError` naming it."""
    if not isinstance(filename, str) or not filename or filename == USER_PREFIX:
        raise ConfigurationError(f"invalid artifact filename {filename!r}: it must be non-empty")
    for bad in ("/", "\\", "\x00"):
        if bad in filename:
            raise ConfigurationError(f"invalid artifact filename {filename!r}: it contains {bad!r}")
    if filename in (".", "..") or filename[len(USER_PREFIX) :] in (".", ".."):
        raise ConfigurationError(f"invalid artifact filename {filename!r}")
    return filename


class ArtifactService(abc.ABC):
    """Stores versioned artifacts (R-ART-1..3).

    Versions of a filename count from 0. A filename starting with ``user:`` is shared by every
    session of the user; any other filename belongs to one session.
    """

    @abc.abstractmethod
    async def save_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str, artifact: Part
    ) -> int:
        """Store a new version; return its number."""

    @abc.abstractmethod
    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        filename: str,
        version: int | None = None,
    ) -> Part | None:
        """The latest version (``version=None``; None when there is no such file) or one version.

        Raises:
            ArtifactNotFoundError: an explicit ``version`` that does not exist.
        """

    @abc.abstractmethod
    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str
    ) -> list[str]:
        """The sorted filenames of the session, ``user:`` files included."""

    @abc.abstractmethod
    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> None:
        """Delete every version of a file (a missing file is a no-op)."""

    @abc.abstractmethod
    async def list_versions(
        self, *, app_name: str, user_id: str, session_id: str, filename: str
    ) -> list[int]:
        """The version numbers of a file, ascending (empty when there is no such file)."""
