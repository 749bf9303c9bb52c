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
import copy
import functools
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
_NOTHING = object()

MAX_BATCH = 256
"""The most jobs one group commit takes."""

LOCK_SLICE = 0.1
"""Seconds one statement waits for another connection's lock (``PRAGMA busy_timeout``) before
its job gives up and is retried from Trio (see :meth:`SqliteThread.run_patiently`), where a
cancelled caller is released."""


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "another connection holds the lock" error."""
    code: int = getattr(exc, "sqlite_errorcode", 0)
    return isinstance(exc, sqlite3.Error) and (code & 0xFF) in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


class _Job:
    def __init__(self, fn: Callable[[sqlite3.Connection], Any], batched: bool = False) -> None:
        self.fn = fn
        self.batched = batched
        self.task = trio.lowlevel.current_task()
        self.token = trio.lowlevel.current_trio_token()
        self.phase = _WAITING
        self.raise_cancel: Any = None  # set when the caller was cancelled

    def deliver(self, result: outcome.Outcome[Any]) -> None:
        """Wake the caller (on the Trio thread)."""
        if self.raise_cancel is not None and _interrupted(result):
            result = outcome.capture(self.raise_cancel)
        trio.lowlevel.reschedule(self.task, result)


def _in_one_transaction(jobs: list[_Job], conn: sqlite3.Connection) -> list[outcome.Outcome[Any]]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        results = [_in_savepoint(job, conn) for job in jobs]
        conn.execute("COMMIT")
    finally:
        if conn.in_transaction:  # a failed COMMIT (or SQLite's own rollback)
            conn.execute("ROLLBACK")
    return results


def _in_savepoint(job: _Job, conn: sqlite3.Connection) -> outcome.Outcome[Any]:
    conn.execute("SAVEPOINT job")
    result: outcome.Outcome[Any] = outcome.capture(job.fn, conn)
    if isinstance(result, outcome.Error):
        conn.execute("ROLLBACK TO job")
    conn.execute("RELEASE job")
    return result


def _per_job(results: outcome.Outcome[Any], count: int) -> list[outcome.Outcome[Any]]:
    """Each job's outcome; when the transaction itself failed, that failure for every job."""
    if isinstance(results, outcome.Error):  # a copy each: every caller raises its own
        return [outcome.Error(copy.copy(results.error)) for _ in range(count)]
    values: list[outcome.Outcome[Any]] = results.unwrap()
    return values


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
        self.batches = 0
        """Group commits made so far (one transaction each)."""

    def _serve(self) -> None:
        held: _Job | object | None = _NOTHING
        while True:
            job = self._jobs.get() if held is _NOTHING else held
            held = _NOTHING
            if job is None:
                break
            assert isinstance(job, _Job)
            if job.batched:
                batch, held = self._gather(job)
                self._run_batch(batch)
            else:
                self._run_one(job)
        if self._conn is not None:
            self._conn.close()

    def _gather(self, first: _Job) -> tuple[list[_Job], _Job | object | None]:
        """``first`` and the batched jobs queued right behind it; the job that ended the batch
        (run next, in its turn), or ``_NOTHING``."""
        batch = [first]
        while len(batch) < MAX_BATCH:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return batch, _NOTHING
            if job is None or not job.batched:
                return batch, job
            batch.append(job)
        return batch, _NOTHING

    def _start(self, job: _Job) -> bool:
        """Mark ``job`` running; False if its caller gave up before it started."""
        with self._lock:
            skipped = job.phase == _SKIPPED
            job.phase = _RUNNING
        return not skipped

    def _finish(self, job: _Job, result: outcome.Outcome[Any]) -> None:
        with self._lock:
            job.phase = _DONE
        with contextlib.suppress(trio.RunFinishedError):
            job.token.run_sync_soon(job.deliver, result)

    def _run_one(self, job: _Job) -> None:
        if self._start(job):
            self._finish(job, outcome.capture(self._call, job.fn))
        else:
            self._finish(job, outcome.Error(sqlite3.OperationalError("interrupted")))

    def _run_batch(self, batch: list[_Job]) -> None:
        """Group commit: the batch's jobs in one transaction (one fsync), each in a savepoint of
        its own, so one job's failure rolls back that job only. Nobody hears back before the
        ``COMMIT`` is done, so commit-before-resume holds for every job of the batch."""
        runnable = []
        for job in batch:
            if self._start(job):
                runnable.append(job)
            else:
                self._finish(job, outcome.Error(sqlite3.OperationalError("interrupted")))
        if runnable:
            results = outcome.capture(self._call, functools.partial(_in_one_transaction, runnable))
            for job, result in zip(runnable, _per_job(results, len(runnable)), strict=True):
                self._finish(job, result)
        self.batches += 1

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

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, batched: bool = False) -> T:
        """Run ``fn(connection)`` on the thread and return its result (or raise its error).

        A ``batched`` job runs inside a transaction that the thread opens for it and for every
        batched job queued right behind it (group commit): ``fn`` must not open one itself. A
        cancelled caller whose batched job is running waits for the batch and gets its result:
        interrupting would undo the other callers' jobs too.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise trio.ClosedResourceError(f"the SQLite connection to {self.path!r} is closed")
        if not self._started:
            self._started = True
            self._thread.start()
        job = _Job(fn, batched)
        self._jobs.put(job)

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            job.raise_cancel = raise_cancel
            with self._lock:
                if job.phase == _WAITING:
                    job.phase = _SKIPPED
                elif job.phase == _RUNNING and self._conn is not None and not job.batched:
                    self._conn.interrupt()  # ours is the one running: jobs run one at a time
            return trio.lowlevel.Abort.FAILED  # the thread reschedules us in every case

        result: T = await trio.lowlevel.wait_task_rescheduled(abort)
        return result

    async def run_patiently(
        self, fn: Callable[[sqlite3.Connection], T], *, patience: float, batched: bool = False
    ) -> T:
        """:meth:`run`, run again while another connection holds the lock, for up to
        ``patience`` seconds.

        SQLite does not always wait for a lock itself: a connection switching a new file to WAL
        while another opens it, or one that would deadlock, gets "database is locked" at once,
        whatever ``busy_timeout`` says. A job that failed so changed nothing (its transaction
        was rolled back; a connection whose set-up failed is opened again by the next job), so
        running it again is safe.
        """
        deadline = trio.current_time() + patience
        while True:
            try:
                return await self.run(fn, batched=batched)
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or trio.current_time() >= deadline:
                    raise
            await trio.lowlevel.checkpoint()  # a cancelled caller leaves here

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
