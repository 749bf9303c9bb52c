"""One SQLite connection served by one dedicated thread.

``sqlite3`` connections must not move between threads, and ``trio.to_thread`` reuses a pool of
worker threads, so each :class:`SqliteThread` owns a thread of its own that opens the connection
and runs the jobs one after the other.

Cancelling a waiting caller is prompt and honest: a job that has not started is skipped; a
running job is interrupted (``Connection.interrupt``, which rolls its transaction back); a job
that finished anyway returns its result, as ``trio.to_thread.run_sync`` does. So a caller that
sees ``Cancelled`` knows the job changed nothing.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import outcome
import trio

__all__: list[str] = []  # internal: used by the SQLite-backed services

T = TypeVar("T")

_WAITING, _RUNNING, _DONE, _SKIPPED = "waiting", "running", "done", "skipped"


class _Job:
    def __init__(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        self.fn = fn
        self.task = trio.lowlevel.current_task()
        self.token = trio.lowlevel.current_trio_token()
        self.phase = _WAITING
        self.raise_cancel: Any = None  # set when the caller was cancelled

    def deliver(self, result: outcome.Outcome[Any]) -> None:
        """Wake the caller (on the Trio thread)."""
        if self.raise_cancel is not None and _interrupted(result):
            result = outcome.capture(self.raise_cancel)
        trio.lowlevel.reschedule(self.task, result)


def _interrupted(result: outcome.Outcome[Any]) -> bool:
    error = getattr(result, "error", None)
    return isinstance(error, sqlite3.OperationalError) and "interrupt" in str(error)


class SqliteThread:
    """A connection to ``path`` living on its own thread; ``await run(fn)`` calls ``fn(conn)``."""

    def __init__(self, path: str, setup: Callable[[sqlite3.Connection], None]) -> None:
        self.path = path
        self._setup = setup
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._serve, name=f"sqlite:{path}", daemon=True)
        self._started = False
        self._closed = False

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._lock:
                skipped = job.phase == _SKIPPED
                job.phase = _RUNNING
            result = (
                outcome.Error(sqlite3.OperationalError("interrupted"))
                if skipped
                else outcome.capture(self._call, job.fn)
            )
            with self._lock:
                job.phase = _DONE
            with contextlib.suppress(trio.RunFinishedError):
                job.token.run_sync_soon(job.deliver, result)
        if self._conn is not None:
            self._conn.close()

    def _call(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        if self._conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                self._setup(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return fn(self._conn)

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` on the thread and return its result (or raise its error)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise trio.ClosedResourceError(f"the SQLite connection to {self.path!r} is closed")
        if not self._started:
            self._started = True
            self._thread.start()
        job = _Job(fn)
        self._jobs.put(job)

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            job.raise_cancel = raise_cancel
            with self._lock:
                if job.phase == _WAITING:
                    job.phase = _SKIPPED
                elif job.phase == _RUNNING and self._conn is not None:
                    self._conn.interrupt()  # ours is the one running: jobs run one at a time
            return trio.lowlevel.Abort.FAILED  # the thread reschedules us in every case

        result: T = await trio.lowlevel.wait_task_rescheduled(abort)
        return result

    async def aclose(self) -> None:
        """Finish the queued jobs, close the connection and stop the thread."""
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        if self._started:
            self._jobs.put(None)
            await trio.to_thread.run_sync(self._thread.join)
        else:
            await trio.lowlevel.checkpoint()
