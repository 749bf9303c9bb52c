"""``python -m benchmarks.server``: the HTTP server under load, trio_agents beside google-adk.

N concurrent clients do ``/run_sse`` on two apps (``emit20``: a custom agent of 20 events;
``tool1``: an ``LlmAgent`` on a scripted model with one tool call; ``benchmarks/server_apps``)
against ``trio-agents api-server`` and ``adk api_server``, with in-memory and SQLite sessions,
and for trio_agents PostgreSQL with 1 and 3 processes (clients spread round-robin). For each
cell: runs/s, p50/p99 latency, the unloaded run, the servers' peak RSS, failed runs, and the
sessions whose stored events differ from what their client received. Every server is started
and stopped by the command, on 127.0.0.1 only. google-adk runs when this interpreter has it
(``pip install -e '.[bench]'``); ``--no-adk`` skips it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import trio

from benchmarks._server_load import Load, load, percentile, unloaded
from benchmarks._servers import adk_available, running

APPS = ("emit20", "tool1")
EVENTS = {"emit20": 20, "tool1": 3}


@dataclass
class Cell:
    """One measured cell of the table."""

    impl: str
    store: str
    processes: int
    app: str
    clients: int
    runs: int
    failed: int
    mismatched: int
    runs_per_s: float
    p50_ms: float
    p99_ms: float
    unloaded_ms: float
    rss_mb: float
    errors: str
    retried_503: int
    cpu_ms_per_run: float
    """Server CPU (user + system, all its processes) per completed run, session creation
    included: a figure the clients' share of the cores does not change."""
    client_cpu_pct: float
    """The clients' CPU time over the wall time (near 100: the clients were the bottleneck)."""


def _pg_dsn() -> str | None:
    """A ``postgresql://`` URI for a fresh schema on a throwaway local cluster, or None."""
    from urllib.parse import quote

    from tests.pg_cluster import ensure_cluster

    try:
        dsn = ensure_cluster()
    except BaseException as exc:  # pytest.skip's exception when PostgreSQL is not installed
        if isinstance(exc, KeyboardInterrupt):
            raise
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        return None
    fields = dict(part.split("=", 1) for part in dsn.split())
    options = quote(fields["options"], safe="")
    return (
        f"postgresql://{fields['user']}@{fields['host']}:{fields['port']}/{fields['dbname']}"
        f"?options={options}"
    )


def _stores(kinds: list[str], tmp: Path) -> Iterator[tuple[str, str, str, int]]:
    """(impl, store kind, URI, processes) for every server configuration to measure."""
    for kind in kinds:
        if kind == "memory":
            yield "trio_agents", kind, "memory://", 1
            yield "google-adk", kind, "memory://", 1
        elif kind == "sqlite":
            yield "trio_agents", kind, f"sqlite:///{tmp / 'trio.db'}", 1
            yield "google-adk", kind, f"sqlite:///{tmp / 'adk.db'}", 1
        elif kind == "postgresql":
            for processes in (1, 3):
                uri = _pg_dsn()
                if uri:
                    yield "trio_agents", kind, uri, processes


def _cell(
    impl: str, kind: str, processes: int, app: str, n: int, result: Load, alone: float, rss: float
) -> Cell:
    latencies = result.latencies()
    done = len(result.done)
    return Cell(
        impl, kind, processes, app, n, len(result.runs), len(result.runs) - done,
        result.mismatched, done / result.wall, percentile(latencies, 0.5) * 1000,
        percentile(latencies, 0.99) * 1000, alone * 1000, rss, result.errors(),
        result.retries(), result.server_cpu * 1000 / max(done, 1),
        100 * result.client_cpu / result.wall,
    )  # fmt: skip


@dataclass(frozen=True)
class Cores:
    """Where the servers and the clients run (None: anywhere)."""

    servers: set[int] | None = None
    clients: set[int] | None = None

    @contextlib.contextmanager
    def clients_pinned(self) -> Iterator[None]:
        """Bind this process (the clients) to its cores while the block runs."""
        if self.clients is None:
            yield
            return
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.clients)
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)


def cores(pin: bool) -> Cores:
    """The clients on the last core, the servers on the others (with ``pin`` and 2+ cores)."""
    available = sorted(os.sched_getaffinity(0))
    if not pin or len(available) < 2:
        return Cores()
    return Cores(set(available[:-1]), {available[-1]})


def _measure(
    impl: str, kind: str, uri: str, processes: int, clients: list[int], runs: int, where: Cores
) -> list[Cell]:
    cells: list[Cell] = []
    with running(impl, uri, processes, where.servers) as servers:
        urls = [server.url for server in servers]

        def cpu() -> float:
            return sum(server.cpu_seconds() for server in servers)

        for app in APPS:
            with where.clients_pinned():
                alone = trio.run(unloaded, urls, impl, app, 5)
            for n in clients:
                with where.clients_pinned():
                    result = trio.run(load, urls, impl, app, n, runs, cpu)
                rss = sum(server.peak_rss_mb() for server in servers)
                cell = _cell(impl, kind, processes, app, n, result, alone, rss)
                print(_row(cell), flush=True)
                if cell.retried_503:
                    print(f"  503 answers retried: {cell.retried_503}", file=sys.stderr)
                if cell.errors:
                    print(f"  failed runs: {cell.errors}", file=sys.stderr, flush=True)
                cells.append(cell)
    return cells


HEADER = (
    "| impl | store | procs | app | N | runs | failed | mismatched | runs/s | server CPU ms/run "
    "| p50 ms | p99 ms | unloaded ms | peak RSS MiB | client CPU % |\n|" + "---|" * 15
)


def _row(c: Cell) -> str:
    return (
        f"| {c.impl} | {c.store} | {c.processes} | {c.app} | {c.clients} | {c.runs} | {c.failed} "
        f"| {c.mismatched} | {c.runs_per_s:.0f} | {c.cpu_ms_per_run:.1f} | {c.p50_ms:.0f} "
        f"| {c.p99_ms:.0f} | {c.unloaded_ms:.1f} | {c.rss_mb:.0f} | {c.client_cpu_pct:.0f} |"
    )


def ratios(cells: list[Cell]) -> list[str]:
    """trio_agents / google-adk per store, app and N, as Markdown rows: runs/s, server CPU per
    run (adk / trio: how many times less CPU a run costs trio_agents) and p99 (adk / trio)."""
    rows = [
        "| store | app | N | runs/s ratio | CPU/run ratio (adk / trio) | p99 ratio (adk / trio) |",
        "|---|---|---|---|---|---|",
    ]
    adk = {(c.store, c.app, c.clients): c for c in cells if c.impl == "google-adk"}
    for c in cells:
        other = adk.get((c.store, c.app, c.clients))
        if c.impl == "trio_agents" and c.processes == 1 and other and other.runs_per_s:
            speed = c.runs_per_s / other.runs_per_s
            cpu = other.cpu_ms_per_run / c.cpu_ms_per_run if c.cpu_ms_per_run else math.nan
            p99 = other.p99_ms / c.p99_ms if c.p99_ms else math.nan
            rows.append(
                f"| {c.store} | {c.app} | {c.clients} | {speed:.2f}x | {cpu:.2f}x | {p99:.2f}x |"
            )
    return rows


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server", description=__doc__)
    parser.add_argument("--clients", default="50,200", help="concurrent clients, comma-separated")
    parser.add_argument("--runs", type=int, default=2, help="runs per client (each a new session)")
    parser.add_argument("--stores", default="memory,sqlite,postgresql", help="store kinds")
    parser.add_argument("--no-adk", action="store_true", help="measure trio_agents only")
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="let clients and servers share every core (by default the clients run on the last "
        "core and the servers on the others)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke: 8 clients, 1 run, memory")
    parser.add_argument("--json", type=Path, help="also write the cells to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.runs, args.stores = "8", 1, "memory"
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure every configuration, print the table and the ratios; 1 if any run failed or
    any session did not store what its client received."""
    args = _args(argv)
    clients = [int(n) for n in args.clients.split(",")]
    with_adk = not args.no_adk and adk_available()
    if not args.no_adk and not with_adk:
        print("google-adk is not installed here: measuring trio_agents only", file=sys.stderr)
    where = cores(not args.no_pin)
    print(f"load average: {os.getloadavg()}, cpus: {os.cpu_count()}", flush=True)
    print(f"server cores: {where.servers or 'any'}, client cores: {where.clients or 'any'}")
    print(HEADER, flush=True)
    cells: list[Cell] = []
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="server-bench-")))
        for impl, kind, uri, processes in _stores(args.stores.split(","), tmp):
            if impl == "google-adk" and not with_adk:
                continue
            cells += _measure(impl, kind, uri, processes, clients, args.runs, where)
    print(f"load average after: {os.getloadavg()}")
    print("\n".join(ratios(cells)))
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in cells], indent=1))
    bad = [c for c in cells if c.failed or c.mismatched]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
