"""Group commit of PostgreSQL appends: concurrent appends share one transaction.

Appends go through one connection of their own, one batch at a time. An append that finds no
batch in flight starts one at once, alone; appends made while a batch is in flight queue, and
the next batch takes them all (up to ``max_batch``) as soon as it ends: one worker-thread hop,
one transaction and a few round trips for the lot (:mod:`._pg_appends`). Under load each append
costs a share of a transaction instead of one of its own; alone, it waits for no one.

Commit-before-resume holds for every append: a caller hears back only once the ``COMMIT``
holding its event succeeded (or failed). One append's refusal (a stale snapshot, a deleted
session) fails that append alone; a statement that fails the whole transaction is retried with
each append alone in a transaction of its own, so that a failing append fails alone too; a
batch whose connection was lost before ``COMMIT`` (nothing of it stored) is tried once more on a
new connection, so a connection whose server process died while idle costs no append. A
failed ``COMMIT`` fails every append of the batch with :class:`~trio_agents.StoreUnavailableError`
(nothing of the batch is stored). Cancellation is honest: a caller still queued leaves at once and
nothing of its append is written; a caller whose batch is running waits for the batch and gets
its result (interrupting it would undo the other callers' appends too), so a cancelled caller
always knows whether its event was committed.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
from collections.abc import Callable
from typing import Any

import attrs
import outcome
import trio

from .._errors import StoreUnavailableError
from ._pg_appends import Append, write_batch
from ._pg_outage import Reachability

__all__: list[str] = []  # internal: used by the PostgreSQL session service

DEFAULT_MAX_BATCH = 256
"""The most appends one transaction takes by default."""

Results = list[outcome.Outcome[int]]


@attrs.define(eq=False)
class _Waiter:
    """A caller waiting for its append (``running``: its batch has started)."""

    append: Append
    task: trio.lowlevel.Task
    running: bool = False


class AppendBatcher:
    """Commits appends in batches on one connection (``connect`` opens it, in a worker thread)."""

    def __init__(
        self,
        connect: Callable[[], Any],
        max_batch: int = DEFAULT_MAX_BATCH,
        reach: Reachability | None = None,
    ) -> None:
        self._connect = connect
        self._reach = reach or Reachability()
        self._max_batch = max_batch
        self._conn: Any = None
        self._queue: dict[_Waiter, None] = {}  # in arrival order
        self._in_flight = False
        self._drained: trio.Event | None = None  # set by aclose: no more appends are taken
        self.transactions = 0
        """Transactions tried so far: one per batch, one more per append retried alone."""

    async def commit(self, append: Append) -> int:
        """Commit ``append`` with the appends queued beside it; its session's new revision.

        Raises:
            StaleSessionError: the session moved past the append's revision.
            SessionNotFoundError: the session is gone.
            StoreUnavailableError: the batch's transaction could not be committed.
            trio.ClosedResourceError: the service is closed.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._drained is not None:
            raise trio.ClosedResourceError("the PostgreSQL session service is closed")
        waiter = _Waiter(append, trio.lowlevel.current_task())
        self._queue[waiter] = None
        if not self._in_flight:
            self._launch(trio.lowlevel.current_trio_token())

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            if waiter.running:  # its batch decides; the caller hears which way
                return trio.lowlevel.Abort.FAILED
            del self._queue[waiter]
            return trio.lowlevel.Abort.SUCCEEDED

        revision: int = await trio.lowlevel.wait_task_rescheduled(abort)
        return revision

    def _launch(self, token: trio.lowlevel.TrioToken) -> None:
        """Start a worker thread on the queue's first ``max_batch`` appends."""
        batch = list(itertools.islice(self._queue, self._max_batch))
        for waiter in batch:
            del self._queue[waiter]
            waiter.running = True
        self._in_flight = True

        def done(result: outcome.Outcome[Results]) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._deliver, batch, result, token)

        appends = [waiter.append for waiter in batch]
        trio.lowlevel.start_thread_soon(functools.partial(self._commit_batch, appends), done)

    def _deliver(
        self, batch: list[_Waiter], result: outcome.Outcome[Results], token: trio.lowlevel.TrioToken
    ) -> None:
        """Wake the batch's callers (on the Trio thread); start the next batch, if any."""
        for waiter, each in zip(batch, _per_append(result, len(batch)), strict=True):
            trio.lowlevel.reschedule(waiter.task, each)
        self._in_flight = False
        if self._queue:
            self._launch(token)
        elif self._drained is not None:
            self._drained.set()

    def _commit_batch(self, appends: list[Append]) -> Results:
        """The batch on the connection (opened first if need be), in a worker thread."""
        import psycopg

        try:
            conn = self._connection()
        except psycopg.OperationalError as exc:
            reason = "no connection to PostgreSQL"
            return [outcome.Error(_unavailable(a, reason, exc)) for a in appends]
        return self._transaction(conn, appends)

    def _connection(self) -> Any:
        if self._conn is not None and _lost(self._conn):
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _transaction(self, conn: Any, appends: list[Append], *, again: bool = True) -> Results:
        """``appends`` in one transaction; when a statement fails it, each append alone; when
        the connection was lost (``again``), once more on a new one."""
        self.transactions += 1
        try:
            results = write_batch(conn, appends)
        except Exception as exc:
            _rollback(conn)
            if _lost(conn):
                self._reach.failed(exc)
            if _lost(conn) and again:
                return self._reconnected(appends, exc)
            if _lost(conn):
                return [outcome.Error(_unavailable(a, _LOST, exc)) for a in appends]
            if len(appends) == 1:
                return [outcome.Error(exc)]
            return [self._transaction(conn, [append])[0] for append in appends]
        try:
            conn.commit()
        except Exception as exc:
            _rollback(conn)
            if _lost(conn):
                self._reach.failed(exc)
            return [outcome.Error(_commit_failed(a, len(appends), conn, exc)) for a in appends]
        self._reach.succeeded()
        return results

    def _reconnected(self, appends: list[Append], lost: Exception) -> Results:
        """``appends`` on a new connection: the one that was lost before ``COMMIT`` (its server
        process terminated while it sat idle, or the server restarted) stored nothing of them."""
        import psycopg

        try:
            conn = self._connection()
        except psycopg.OperationalError:
            return [outcome.Error(_unavailable(a, _LOST, lost)) for a in appends]
        return self._transaction(conn, appends, again=False)

    async def aclose(self) -> None:
        """Take no more appends, wait for those queued, close the connection."""
        if self._drained is None:
            self._drained = trio.Event()
            if not self._in_flight:
                self._drained.set()
        await self._drained.wait()
        conn, self._conn = self._conn, None
        if conn is not None:
            await trio.to_thread.run_sync(conn.close)


_LOST = "the connection to PostgreSQL was lost before COMMIT"


def _per_append(result: outcome.Outcome[Results], count: int) -> Results:
    """Each append's outcome; when the batch's code itself failed, that failure for each."""
    if isinstance(result, outcome.Error):  # a copy each: every caller raises its own
        return [outcome.Error(copy.copy(result.error)) for _ in range(count)]
    return result.unwrap()


def _lost(conn: Any) -> bool:
    return bool(conn.closed or conn.broken)


def _rollback(conn: Any) -> None:
    """Roll back what the failed transaction did (a lost connection has nothing to roll back)."""
    import psycopg

    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def _unavailable(append: Append, reason: str, exc: Exception) -> StoreUnavailableError:
    session_id = append.key[2]
    error = StoreUnavailableError(
        f"Session {session_id}: {reason} ({str(exc).strip()}); the event was not stored, "
        "retry shortly",
        session_id=session_id,
    )
    error.__cause__ = exc
    return error


def _commit_failed(append: Append, size: int, conn: Any, exc: Exception) -> StoreUnavailableError:
    """The error of each append of a batch whose ``COMMIT`` failed."""
    session_id = append.key[2]
    others = f" with {size - 1} other append{'s' if size > 2 else ''}" if size > 1 else ""
    if _lost(conn):
        outcome_text = (
            "the connection was lost during COMMIT, so the event may or may not be stored: "
            "reload the session before retrying"
        )
    else:
        outcome_text = "nothing of the transaction was stored; retry shortly"
    error = StoreUnavailableError(
        f"Session {session_id}: the transaction holding the event{others} failed to commit "
        f"({str(exc).strip()}); {outcome_text}",
        session_id=session_id,
    )
    error.__cause__ = exc
    return error
