"""In-memory artifact storage."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from .._content import Part
from .._errors import ArtifactNotFoundError
from .._ids import now
from ._base import (
    ArtifactService,
    ArtifactVersion,
    check_artifact,
    check_metadata,
    mime_type_of,
    scope_of,
)

__all__ = ["InMemoryArtifactService"]

_Key = tuple[str, str, str | None, str]
"""(app name, user id, session id or None for the user's files, filename)."""


@attrs.frozen
class _Saved:
    part: Part
    record: ArtifactVersion


def _uri(key: _Key, version: int) -> str:
    """google-adk's in-memory URI of a version (names as they are, unescaped)."""
    app, user, session, filename = key
    scope = "" if session is None else f"/sessions/{session}"
    return f"memory://apps/{app}/users/{user}{scope}/artifacts/{filename}/versions/{version}"


class InMemoryArtifactService(ArtifactService):
    """Artifacts kept in process memory (parts are immutable, so versions share them)."""

    def __init__(self) -> None:
        self._files: dict[_Key, list[_Saved]] = {}

    @staticmethod
    def _key(app_name: str, user_id: str, session_id: str | None, filename: str) -> _Key:
        return (app_name, user_id, scope_of(filename, session_id), filename)

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
        await trio.lowlevel.checkpoint()
        check_artifact(artifact, filename)
        metadata = check_metadata(custom_metadata, filename)
        key = self._key(app_name, user_id, session_id, filename)
        versions = self._files.setdefault(key, [])
        version = len(versions)
        record = ArtifactVersion(
            version=version,
            canonical_uri=_uri(key, version),
            custom_metadata=metadata,
            create_time=now(),
            mime_type=mime_type_of(artifact),
        )
        versions.append(_Saved(artifact, record))
        return version

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> Part | None:
        await trio.lowlevel.checkpoint()
        versions = self._files.get(self._key(app_name, user_id, session_id, filename), [])
        if version is None:
            return versions[-1].part if versions else None
        if not 0 <= version < len(versions):
            raise ArtifactNotFoundError(filename=filename, version=version)
        return versions[version].part

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        await trio.lowlevel.checkpoint()
        scopes = (None, session_id)
        return sorted(
            name
            for (app, user, scope, name) in self._files
            if app == app_name and user == user_id and scope in scopes
        )

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        await trio.lowlevel.checkpoint()
        self._files.pop(self._key(app_name, user_id, session_id, filename), None)

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        await trio.lowlevel.checkpoint()
        return list(
            range(len(self._files.get(self._key(app_name, user_id, session_id, filename), [])))
        )

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        await trio.lowlevel.checkpoint()
        versions = self._files.get(self._key(app_name, user_id, session_id, filename), [])
        return [
            attrs.evolve(saved.record, custom_metadata=copy.deepcopy(saved.record.custom_metadata))
            for saved in versions
        ]
