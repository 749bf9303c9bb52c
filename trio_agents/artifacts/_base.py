"""The artifact-service interface: versioned files per session (or per user)."""

from __future__ import annotations

import abc
import copy
from collections.abc import Mapping
from typing import Any

import attrs

from .._content import Part
from .._errors import ArtifactNotFoundError, ConfigurationError
from .._serde import check_storable

__all__ = [
    "USER_PREFIX",
    "ArtifactService",
    "ArtifactVersion",
    "check_artifact",
    "check_filename",
    "check_metadata",
    "mime_type_of",
    "scope_of",
]

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


def scope_of(filename: str, session_id: str | None) -> str | None:
    """Where ``filename`` lives: None for a ``user:`` file, else its session's id.

    Raises:
        ConfigurationError: an invalid filename, or a session file named without a session id.
    """
    check_filename(filename)
    if filename.startswith(USER_PREFIX):
        return None
    if session_id is None:
        raise ConfigurationError(
            f"artifact {filename!r} belongs to a session: a session_id is needed "
            f"(only {USER_PREFIX!r} files can be used without one)"
        )
    return session_id


def check_artifact(artifact: object, filename: str) -> Part:
    """Return ``artifact`` if it can be stored: a :class:`Part` that holds something; an empty
    part raises :class:`ConfigurationError` naming the file (as google-adk refuses it)."""
    if not isinstance(artifact, Part):
        raise ConfigurationError(f"an artifact is a Part, got {type(artifact).__name__}")
    if artifact == _EMPTY_PART:
        raise ConfigurationError(f"artifact {filename!r} is an empty Part: nothing to store")
    return artifact


_EMPTY_PART = Part()


def check_metadata(custom_metadata: Mapping[str, Any] | None, filename: str) -> dict[str, Any]:
    """A private copy of ``custom_metadata`` (``{}`` for None), or
    :class:`~trio_agents.SerializationError` naming what cannot be stored as JSON."""
    if not custom_metadata:
        return {}
    check_storable(dict(custom_metadata), f"custom_metadata of artifact {filename!r}")
    return copy.deepcopy(dict(custom_metadata))


def mime_type_of(artifact: Part) -> str | None:
    """The MIME type google-adk records for a saved part: its data's, ``text/plain`` for text."""
    if artifact.inline_data is not None:
        return artifact.inline_data.mime_type
    if artifact.text is not None:
        return "text/plain"
    if artifact.file_data is not None:
        return artifact.file_data.mime_type
    return None


@attrs.frozen(kw_only=True)
class ArtifactVersion:
    """What is known of one saved version of an artifact (google-adk's ``ArtifactVersion``).

    ``canonical_uri`` names where the version is stored (``memory://…`` in memory, a ``file:``
    URI on disk); ``custom_metadata`` is what the caller saved with it; ``create_time`` is when
    it was saved (seconds since the epoch); ``mime_type`` is the data's, ``text/plain`` for text.
    """

    version: int
    canonical_uri: str
    custom_metadata: Mapping[str, Any] = attrs.field(factory=dict)
    create_time: float = 0.0
    mime_type: str | None = None


class ArtifactService(abc.ABC):
    """Stores versioned artifacts (R-ART-1..3).

    Versions of a filename count from 0. A filename starting with ``user:`` is shared by every
    session of the user; any other filename belongs to one session. As in google-adk,
    ``session_id`` may be omitted (``None``) for ``user:`` files; a session file named without
    one raises :class:`~trio_agents.ConfigurationError`, and :meth:`list_artifact_keys` without
    one lists the user's files only. Saving an empty :class:`~trio_agents.Part` raises
    :class:`~trio_agents.ConfigurationError` (google-adk also refuses parts with only a function
    call or response; trio_agents stores any part that holds something).
    """

    @abc.abstractmethod
    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: Part,
        session_id: str | None = None,
        custom_metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """Store a new version; return its number. ``custom_metadata`` (JSON) is kept with the
        version, for :meth:`list_artifact_versions` and :meth:`get_artifact_version`."""

    @abc.abstractmethod
    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> Part | None:
        """The latest version (``version=None``; None when there is no such file) or one version.

        Raises:
            ArtifactNotFoundError: an explicit ``version`` that does not exist.
        """

    @abc.abstractmethod
    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        """The sorted filenames of the session, ``user:`` files included (without a session id:
        the ``user:`` files only)."""

    @abc.abstractmethod
    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        """Delete every version of a file (a missing file is a no-op)."""

    @abc.abstractmethod
    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        """The version numbers of a file, ascending (empty when there is no such file)."""

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        """Every version of a file with what is known of it, oldest first (empty when there is
        no such file). A backend that keeps no such records raises :class:`NotImplementedError`
        (every shipped backend keeps them)."""
        raise NotImplementedError(f"{type(self).__name__} does not support list_artifact_versions")

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        """What is known of one version (``None``: the latest); None when there is no such file.

        Raises:
            ArtifactNotFoundError: an explicit ``version`` that does not exist (as
                :meth:`load_artifact`; google-adk answers None).
        """
        versions = await self.list_artifact_versions(
            app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
        )
        if version is None:
            return versions[-1] if versions else None
        for found in versions:
            if found.version == version:
                return found
        raise ArtifactNotFoundError(filename=filename, version=version)
