"""Artifacts as files on disk: one JSON file per version, written atomically.

Layout under ``root``::

    <app>/<user>/user/<filename>/<version>.json         user: files, shared by the user's sessions
    <app>/<user>/sessions/<session>/<filename>/<version>.json

Path segments are percent-encoded, so any valid filename or id is one directory name (never
starting with ".", which marks our own debris). A version file holds the whole
:class:`~trio_agents.Part` as JSON (text, or bytes in base64 with their MIME type, and any other
field), so its metadata travels with it; the version's own record (when it was saved, the
caller's custom metadata) sits beside the part's fields under ``artifactVersion``, which reading
the part ignores (a file written before that record existed reads as saved at its mtime, with no
custom metadata).

A version is written to a temporary file in its directory, flushed and fsynced, then published
with ``os.link`` to ``<version>.json`` -- which fails if that version exists, so two writers (two
processes) saving one file at once get different versions -- and the directory is fsynced, as is
every directory the save created. A crash therefore never leaves a partial version: only names
``<digits>.json`` are versions, stray temporary files are ignored. Deleting renames the file's
directory away first, so readers see all versions or none.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import trio

from .._content import Part
from .._errors import ArtifactNotFoundError, ConfigurationError
from .._ids import now
from .._serde import dumps, loads, structure, unstructure
from ._base import (
    ArtifactService,
    ArtifactVersion,
    check_artifact,
    check_metadata,
    mime_type_of,
    scope_of,
)

__all__ = ["FileArtifactService"]

_SUFFIX = ".json"
_MAX_SEGMENT = 255  # bytes in one directory name on common filesystems
_ATTEMPTS = 100  # a save retries when a concurrent delete takes its directory away


def _segment(value: str, what: str) -> str:
    """One directory name for ``value``: percent-encoded, never starting with "."."""
    encoded = quote(value, safe="")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > _MAX_SEGMENT:
        raise ConfigurationError(
            f"{what} {value[:40]!r}... is too long for FileArtifactService "
            f"({len(encoded)} bytes once encoded, at most {_MAX_SEGMENT})"
        )
    return encoded or "%"  # "" -> "%", which quote() never produces


def _versions(directory: Path) -> list[int]:
    """The published versions in ``directory`` (temporary files and strays ignored)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        stem = name.removesuffix(_SUFFIX)
        if name.endswith(_SUFFIX) and stem.isascii() and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_directories(directory: Path) -> None:
    """``mkdir -p``, fsyncing the parent of every directory made, so they survive a crash."""
    missing = []
    while not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for made in reversed(missing):
        with contextlib.suppress(FileExistsError):
            made.mkdir()
        _fsync_directory(made.parent)


def _publish_once(directory: Path, payload: bytes) -> int:
    """Write ``payload`` as the next version in ``directory``; return the version."""
    _make_directories(directory)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        while True:
            version = (_versions(directory) or [-1])[-1] + 1
            try:
                os.link(temporary, directory / f"{version}{_SUFFIX}")
            except FileExistsError:
                continue  # another writer took that version; take the next one
            _fsync_directory(directory)
            return version
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _publish(directory: Path, payload: bytes) -> int:
    """:func:`_publish_once`, again when a concurrent delete removed the directory meanwhile.

    The temporary file lives in the directory, so a successful link proves the version was
    numbered within the directory that holds it: versions stay contiguous from 0.
    """
    for _ in range(_ATTEMPTS - 1):
        with contextlib.suppress(FileNotFoundError):
            return _publish_once(directory, payload)
    return _publish_once(directory, payload)


def _remove(directory: Path) -> None:
    """Remove a file's versions: renamed away first, so readers see all or nothing."""
    doomed = directory.with_name(f".deleted-{uuid.uuid4().hex}")
    try:
        os.rename(directory, doomed)
    except FileNotFoundError:
        return  # no such file, or a concurrent delete got there first
    _fsync_directory(directory.parent)
    shutil.rmtree(doomed, ignore_errors=True)


def _read(directory: Path, filename: str, version: int | None) -> Part | None:
    versions = _versions(directory)
    chosen = versions[-1] if version is None and versions else version
    try:
        if chosen is None or chosen not in versions:
            raise FileNotFoundError
        text = (directory / f"{chosen}{_SUFFIX}").read_text(encoding="utf-8")
    except FileNotFoundError:  # never saved, or deleted meanwhile
        if version is None:
            return None
        raise ArtifactNotFoundError(filename=filename, version=version) from None
    return structure(loads(text), Part, path=f"artifact {filename!r}")


_RECORD = "artifactVersion"


def _records(directory: Path) -> list[ArtifactVersion]:
    found = []
    for version in _versions(directory):
        path = directory / f"{version}{_SUFFIX}"
        try:
            document = loads(path.read_text(encoding="utf-8"))
            saved = path.stat().st_mtime
        except FileNotFoundError:  # deleted meanwhile
            continue
        record = document.get(_RECORD) if isinstance(document, dict) else None
        record = record if isinstance(record, dict) else {}
        part = structure(document, Part, path=f"artifact version {path.name}")
        found.append(
            ArtifactVersion(
                version=version,
                canonical_uri=path.absolute().as_uri(),
                custom_metadata=dict(record.get("customMetadata") or {}),
                create_time=float(record.get("createTime", saved)),
                mime_type=mime_type_of(part),
            )
        )
    return found


def _names(places: list[Path]) -> list[str]:
    found: set[str] = set()
    for place in places:
        with contextlib.suppress(FileNotFoundError):
            for entry in os.listdir(place):
                if not entry.startswith(".") and _versions(place / entry):
                    found.add(unquote(entry))
    return sorted(found)


class FileArtifactService(ArtifactService):
    """Versioned artifacts under the directory ``root`` (created when missing).

    Same semantics as :class:`~trio_agents.artifacts.InMemoryArtifactService`: versions count from
    0 (again from 0 after a delete), ``user:`` files are shared by the user's sessions, invalid
    filenames (empty, with a path separator or NUL, ``.``/``..``) and names too long for one
    directory entry raise :class:`~trio_agents.ConfigurationError`. Several services (several
    processes) may share one root. Disk work runs in worker threads.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _base(self, app_name: str, user_id: str) -> Path:
        return self.root / _segment(app_name, "app name") / _segment(user_id, "user id")

    def _directory(
        self, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> Path:
        scope = scope_of(filename, session_id)
        base = self._base(app_name, user_id)
        name = _segment(filename, "artifact filename")
        if scope is None:
            return base / "user" / name
        return base / "sessions" / _segment(scope, "session id") / name

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
        check_artifact(artifact, filename)
        record = {"createTime": now(), "customMetadata": check_metadata(custom_metadata, filename)}
        directory = self._directory(app_name, user_id, session_id, filename)
        document = {**unstructure(artifact), _RECORD: record}
        payload = dumps(document, path=f"artifact {filename!r}").encode()
        return await trio.to_thread.run_sync(_publish, directory, payload)

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> Part | None:
        directory = self._directory(app_name, user_id, session_id, filename)
        return await trio.to_thread.run_sync(_read, directory, filename, version)

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        base = self._base(app_name, user_id)
        places = [base / "user"]
        if session_id is not None:
            places.append(base / "sessions" / _segment(session_id, "session id"))
        return await trio.to_thread.run_sync(_names, places)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        directory = self._directory(app_name, user_id, session_id, filename)
        await trio.to_thread.run_sync(_remove, directory)

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        directory = self._directory(app_name, user_id, session_id, filename)
        return await trio.to_thread.run_sync(_versions, directory)

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        directory = self._directory(app_name, user_id, session_id, filename)
        return await trio.to_thread.run_sync(_records, directory)
