"""``python -m benchmarks.resume``: resuming a paused invocation on a long session.

A session holds ``--events`` events of earlier invocations (10,000 by default) and a paused
invocation at its end; the time measured is from ``run(invocation_id=..., new_message=<answer>)``
to the end of the resumed run (medians over ``--reps`` resumes, each of a freshly paused
invocation). trio_agents on memory, SQLite and PostgreSQL, warm (the service that wrote the
session resumes) and cold (a fresh service resumes); google-adk 2.13 on its
``InMemorySessionService`` and ``SqliteSessionService`` with its own ``run_async``. For cold
resumes on trio_agents it also reports how many events were parsed from the store and the time of
a fresh read of the whole session against a read of its last 50 events.

Each implementation and store runs in its own process (``benchmarks._resume_trio``,
``benchmarks._resume_adk``); PostgreSQL is a throwaway cluster on 127.0.0.1 (skipped when its
binaries are missing). Timings are never asserted; a failing check aborts the run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _pg_dsn() -> str | None:
    """A DSN for a fresh schema on a throwaway local cluster, or None without PostgreSQL."""
    from tests.pg_cluster import ensure_cluster

    try:
        return ensure_cluster()
    except BaseException as exc:  # pytest.skip's exception when PostgreSQL is not installed
        if isinstance(exc, KeyboardInterrupt):
            raise
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        return None


def _specs(stores: list[str], adk: bool, tmp: Path) -> Iterator[tuple[str, str]]:
    """(worker module, store spec) for every process to run."""
    for store in stores:
        if store == "memory":
            yield "benchmarks._resume_trio", "memory"
            if adk:
                yield "benchmarks._resume_adk", "memory"
        elif store == "sqlite":
            yield "benchmarks._resume_trio", f"sqlite:{tmp / 'trio.db'}"
            if adk:
                yield "benchmarks._resume_adk", f"sqlite:{tmp / 'adk.db'}"
        elif store == "postgresql":
            dsn = _pg_dsn()
            if dsn is not None:
                yield "benchmarks._resume_trio", f"pg:{dsn}"
        else:
            raise SystemExit(f"unknown store {store!r} (memory, sqlite, postgresql)")


def _run(module: str, spec: str, events: int, reps: int) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", module, spec, str(events), str(reps)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{module} {spec.partition(':')[0]} failed:\n{done.stderr}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _ms(summary: dict[str, Any]) -> str:
    return f"{summary['median']:.1f} ({summary['min']:.1f}–{summary['max']:.1f})"


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table: one line per (implementation, store, mode)."""
    adk = {
        (r["store"], r["mode"]): r["resume_ms"]["median"]
        for r in rows
        if r["impl"] != "trio_agents"
    }
    lines = [
        "| impl | store | mode | history | resume ms, median (min–max) | × google-adk |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        theirs = adk.get((r["store"], r["mode"]))
        ratio = (
            ""
            if theirs is None or r["impl"] != "trio_agents"
            else f"{r['resume_ms']['median'] / theirs:.3f}"
        )
        lines.append(
            f"| {r['impl']} | {r['store']} | {r['mode']} | {r['history']} | "
            f"{_ms(r['resume_ms'])} | {ratio} |"
        )
    return "\n".join(lines)


def reads(rows: list[dict[str, Any]]) -> str:
    """What a cold trio_agents resume reads from the store."""
    lines = [
        "| store | events parsed by a cold resume | events stored | read whole session ms "
        "| read last 50 ms |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if "parsed_events" in r:
            lines.append(
                f"| {r['store']} | {r['parsed_events']} | {r['stored_events']} | "
                f"{_ms(r['read_full_ms'])} | {_ms(r['read_last50_ms'])} |"
            )
    return "\n".join(lines)


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resume", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000, help="history size (10000)")
    parser.add_argument("--reps", type=int, default=5, help="timed resumes per row (5)")
    parser.add_argument("--stores", default="memory,sqlite,postgresql")
    parser.add_argument("--no-adk", action="store_true", help="skip google-adk")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 events, 2 reps")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    events, reps = (200, 2) if args.quick else (args.events, args.reps)
    adk = not args.no_adk and importlib.util.find_spec("google.adk") is not None
    if not adk and not args.no_adk:
        print("google-adk skipped: not importable (pip install -e '.[bench]')", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for module, spec in _specs(args.stores.split(","), adk, Path(tmp)):
            rows += _run(module, spec, events, reps)
    print(f"# Resume latency ({events} events of history, {reps} resumes per row)\n")
    print(table(rows))
    print("\n## What a cold trio_agents resume reads\n")
    print(reads(rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"events": events, "reps": reps, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
