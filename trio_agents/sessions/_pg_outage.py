"""Whether a PostgreSQL session service last found its database unreachable.

A connection attempt that failed, or a transaction that lost its connection, marks the database
*down*; the next success of any kind marks it up again. While it is down, a request waiting for
a pooled connection gives up after :data:`OUTAGE_WAIT` seconds instead of the pool's whole
timeout, and new connections (for locks, appends, ``LISTEN``) give up connecting after
:data:`OUTAGE_CONNECT_TIMEOUT` seconds: callers hear
:class:`~trio_agents.StoreUnavailableError` (the server's 503) at once rather than after half a
minute. A database that is merely busy (every pooled connection in use) is not down: its
callers wait the pool's timeout, as before. Marks are plain attribute writes (worker threads
make them): nothing is paid per query but a store.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OUTAGE_CONNECT_TIMEOUT", "OUTAGE_WAIT"]

OUTAGE_WAIT = 1.5
"""Seconds a request waits for a pooled connection while the database is known unreachable."""
OUTAGE_CONNECT_TIMEOUT = 2
"""Seconds a new connection may take to connect while the database is known unreachable
(libpq's smallest ``connect_timeout``)."""


class Reachability:
    """The last verdict on the database: ``down`` holds the reason while it is unreachable."""

    __slots__ = ("down",)

    def __init__(self) -> None:
        self.down: str | None = None

    def failed(self, exc: BaseException) -> None:
        """A connection attempt failed, or a transaction lost its connection, with ``exc``."""
        self.down = " ".join(str(exc).split()) or type(exc).__name__

    def succeeded(self) -> None:
        """Something reached the database: it is up."""
        self.down = None

    def wait(self, timeout: float) -> float:
        """How long a caller waits for a pooled connection: ``timeout``, or less when down."""
        return timeout if self.down is None else min(timeout, OUTAGE_WAIT)

    def connect_options(self) -> dict[str, Any]:
        """Extra ``psycopg.connect`` options: a short ``connect_timeout`` while down."""
        return {} if self.down is None else {"connect_timeout": OUTAGE_CONNECT_TIMEOUT}
