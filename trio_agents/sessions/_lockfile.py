"""Session leases as OS file locks: the kernel releases them when their process dies.

A leased session has a lock file in a directory beside the database (``<database>-leases/``),
named by a hash of the session's key, and its holder has it locked with ``flock``. ``flock``
belongs to the open file, not to the process: two services in one process, each opening the
file for itself, exclude each other exactly as two processes do, and closing one never drops
another's lock (``fcntl`` record locks would do both wrong). The descriptor is close-on-exec,
so a subprocess never inherits a lease.

The holder removes its file before unlocking it, so the directory holds one file per session
leased right now (plus any left by a process that died, which the session's next holder
removes). A taker that locked a file its holder has just removed finds the path gone or
pointing to a newer file, and starts again on the path.

Every call here is a short, non-blocking system call on a local file; the service runs them
in a worker thread all the same (see :meth:`SqliteSessionService.lease`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence

from .._errors import ConfigurationError

__all__: list[str] = []  # internal: used by SqliteSessionService


def lock_path(database: str, key: Sequence[str]) -> str:
    """The lock file of the session ``key`` (app, user, session) of ``database``."""
    digest = hashlib.blake2b(
        json.dumps(list(key)).encode(), digest_size=16, person=b"trio_agents.run"
    ).hexdigest()
    return os.path.join(f"{database}-leases", f"{digest}.lock")


def try_lock(path: str) -> int | None:
    """Lock ``path`` (created if missing) without waiting: its descriptor, or None if held."""
    try:
        import fcntl  # POSIX only: imported where a lease is taken
    except ImportError:
        raise ConfigurationError(
            "SqliteSessionService leases need flock, which this platform lacks"
        ) from None
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if _still_at(path, fd):
            return fd
        os.close(fd)  # its holder removed it after we opened it: lock the file there now


def unlock(path: str, fd: int) -> None:
    """Remove the lock file, then release the lock (closing the descriptor)."""
    try:
        with contextlib.suppress(OSError):  # a file left behind is harmless, just untidy
            os.unlink(path)
    finally:
        os.close(fd)


def _open(path: str) -> int:
    flags = os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC
    try:
        try:
            return os.open(path, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return os.open(path, flags, 0o644)
    except OSError as exc:
        raise ConfigurationError(f"cannot open the session lease file {path!r}: {exc}") from exc


def _still_at(path: str, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)
