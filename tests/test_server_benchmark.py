"""The server benchmark keeps working: quick mode in a subprocess, checks on, no timing asserted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from benchmarks._server_load import MESSAGE, _events_of_stream, _same
from tests.bench_runs import run_quick

USER_EVENT = {"id": "u", "author": "user", "content": MESSAGE}


def _quick(tmp_path: Path, *extra: str) -> list[dict[str, object]]:
    cells: list[dict[str, object]]
    _, cells = run_quick("benchmarks.server", tmp_path / "cells.json", *extra, timeout=120)
    return cells


def test_quick_mode_serves_both_apps_and_every_session_reads_back(tmp_path: Path) -> None:
    cells = _quick(tmp_path, "--no-adk")
    assert {(c["impl"], c["store"], c["app"]) for c in cells} == {
        ("trio_agents", "memory", "emit20"),
        ("trio_agents", "memory", "tool1"),
    }
    for cell in cells:
        assert (cell["clients"], cell["runs"], cell["failed"], cell["mismatched"]) == (8, 8, 0, 0)
        assert isinstance(cell["rss_mb"], float) and cell["rss_mb"] > 0


@pytest.mark.skipif(
    importlib.util.find_spec("google.adk") is None,
    reason="google-adk is not installed (pip install -e '.[bench]')",
)
def test_quick_mode_serves_the_same_apps_on_adk_api_server(tmp_path: Path) -> None:
    cells = _quick(tmp_path)
    adk = [c for c in cells if c["impl"] == "google-adk"]
    assert {c["app"] for c in adk} == {"emit20", "tool1"}
    assert all((c["failed"], c["mismatched"]) == (0, 0) for c in adk)


def test_the_check_flags_a_session_that_differs_from_what_its_client_received() -> None:
    received = [{"id": "a", "author": "x"}, {"id": "b", "author": "x"}]
    assert _same([USER_EVENT, *received], received)
    assert not _same([USER_EVENT, received[0]], received)
    assert not _same([USER_EVENT, received[1], received[0]], received)
    assert not _same([USER_EVENT, received[0], {"id": "b", "author": "y"}], received)
    assert not _same(received, received)  # the user's message is missing


def test_a_trio_agents_run_counts_only_when_its_stream_ends_with_done() -> None:
    events = ['data: {"id": "a"}', "", "event: done", 'data: {"invocationId": "i"}', ""]
    assert _events_of_stream(events, "trio_agents") == ([{"id": "a"}], None)
    cut = _events_of_stream(events[:2], "trio_agents")
    assert cut[1] is not None and "not 'done'" in cut[1]
    failed = _events_of_stream(["event: error", 'data: {"error": "boom"}', ""], "trio_agents")
    assert failed[1] is not None
    assert _events_of_stream(['data: {"error": "locked"}', ""], "google-adk")[1] is not None


@pytest.mark.parametrize("mode", ["runner", "asgi", "asgi-dev"])
@pytest.mark.parametrize("app", ["emit20", "tool1", "emit0"])
async def test_the_serving_profile_drives_whole_runs_in_process(mode: str, app: str) -> None:
    """``benchmarks.serve_profile`` runs each app to its ``done`` frame (it exits otherwise)."""
    from benchmarks import serve_profile

    elapsed = await serve_profile._load(mode, app, 2)
    assert elapsed > 0
