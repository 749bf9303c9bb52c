"""FileArtifactService beyond the contract suite: persistence, atomicity, layout (issue 7).

The contract suite (``test_contract.py``, the ``file`` entry of ``ARTIFACT_SERVICE_FACTORIES``)
already checks R-ART-1/R-ART-2 against this backend; here: what only a disk can get wrong.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings, strategies as st

from trio_agents import ConfigurationError, Part
from trio_agents.artifacts import FileArtifactService
from trio_agents.artifacts._file import _publish, _publish_once

WHERE = {"app_name": "app", "user_id": "u", "session_id": "s"}


async def test_versions_survive_a_new_service_on_the_same_root(tmp_path: Path) -> None:
    """R-ART-1 across processes: a second service on the root sees every version and key."""
    first = FileArtifactService(tmp_path)
    await first.save_artifact(**WHERE, filename="a.txt", artifact=Part.from_text("one"))
    await first.save_artifact(
        **WHERE, filename="a.txt", artifact=Part.from_bytes(b"\x00\x01", "image/png")
    )
    await first.save_artifact(**WHERE, filename="user:p", artifact=Part.from_text("pref"))
    again = FileArtifactService(tmp_path)
    assert await again.list_versions(**WHERE, filename="a.txt") == [0, 1]
    assert await again.list_artifact_keys(**WHERE) == ["a.txt", "user:p"]
    loaded = await again.load_artifact(**WHERE, filename="a.txt")
    assert loaded is not None and loaded.inline_data is not None
    assert (loaded.inline_data.data, loaded.inline_data.mime_type) == (b"\x00\x01", "image/png")
    assert await again.load_artifact(**WHERE, filename="a.txt", version=0) == Part.from_text("one")
    assert await again.save_artifact(**WHERE, filename="a.txt", artifact=Part.from_text("2")) == 2


@pytest.mark.parametrize(
    "part",
    [
        pytest.param(Part.from_text(""), id="empty-text"),
        pytest.param(Part(text="why", thought=True, thought_signature=b"\xff\x00"), id="thought"),
        pytest.param(Part.from_bytes(b"", "text/plain"), id="empty-bytes"),
        pytest.param(Part.from_function_call("f", {"x": [1, None]}, id="c1"), id="call"),
    ],
)
async def test_every_field_of_a_part_round_trips_through_disk(tmp_path: Path, part: Part) -> None:
    """Metadata is stored with each version: text vs bytes, MIME type, flags (R-ART-3)."""
    await FileArtifactService(tmp_path).save_artifact(**WHERE, filename="f", artifact=part)
    assert await FileArtifactService(tmp_path).load_artifact(**WHERE, filename="f") == part


async def test_a_version_is_one_self_describing_json_file(tmp_path: Path) -> None:
    service = FileArtifactService(tmp_path)
    await service.save_artifact(**WHERE, filename="a.png", artifact=Part.from_bytes(b"hi", "x/y"))
    (path,) = await trio.to_thread.run_sync(_files_under, tmp_path)
    assert path.relative_to(tmp_path).parts == ("app", "u", "sessions", "s", "a.png", "0.json")
    stored = json.loads(await trio.to_thread.run_sync(path.read_text))
    assert stored["inlineData"]["mimeType"] == "x/y"  # ADK JSON (camelCase)


async def test_a_crash_before_publishing_leaves_no_partial_version(tmp_path: Path) -> None:
    """A writer killed between its temporary file and the link leaves debris, never a version."""
    service = FileArtifactService(tmp_path)
    await service.save_artifact(**WHERE, filename="r.txt", artifact=Part.from_text("v0"))
    await trio.to_thread.run_sync(_leave_debris, tmp_path, "r.txt")
    assert await service.list_versions(**WHERE, filename="r.txt") == [0]
    assert await service.load_artifact(**WHERE, filename="r.txt") == Part.from_text("v0")
    assert (
        await service.save_artifact(**WHERE, filename="r.txt", artifact=Part.from_text("v1")) == 1
    )
    assert await service.load_artifact(**WHERE, filename="r.txt") == Part.from_text("v1")


async def test_a_crash_during_a_delete_leaves_no_key(tmp_path: Path) -> None:
    """Delete renames the file's directory away first; what is left of it is not a file."""
    service = FileArtifactService(tmp_path)
    await service.save_artifact(**WHERE, filename="d", artifact=Part.from_text("x"))
    directory = await trio.to_thread.run_sync(_find, tmp_path, "d")
    await trio.to_thread.run_sync(directory.rename, directory.with_name(".deleted-crashed"))
    assert await service.list_artifact_keys(**WHERE) == []
    assert await service.load_artifact(**WHERE, filename="d") is None
    assert await service.save_artifact(**WHERE, filename="d", artifact=Part.from_text("y")) == 0


async def test_a_temporary_file_never_counts_even_when_named_like_a_version(
    tmp_path: Path,
) -> None:
    service = FileArtifactService(tmp_path)
    await service.save_artifact(**WHERE, filename="n", artifact=Part.from_text("x"))
    directory = await trio.to_thread.run_sync(_find, tmp_path, "n")
    for stray in ("\u00b2.json", "1.json.part", ".5.json", "-1.json", "1 .json"):
        await trio.to_thread.run_sync((directory / stray).write_text, "junk")
    assert await service.list_versions(**WHERE, filename="n") == [0]


async def test_concurrent_saves_from_several_services_get_distinct_versions(
    tmp_path: Path,
) -> None:
    services = [FileArtifactService(tmp_path) for _ in range(4)]  # as if several processes
    versions: list[int] = []

    async def save(service: FileArtifactService, n: int) -> None:
        part = Part.from_text(str(n))
        versions.append(await service.save_artifact(**WHERE, filename="c.txt", artifact=part))

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(save, services[n % 4], n)
    assert sorted(versions) == list(range(20))
    texts = set()
    for v in range(20):
        part = await services[0].load_artifact(**WHERE, filename="c.txt", version=v)
        assert part is not None
        texts.add(part.text)
    assert texts == {str(n) for n in range(20)}


@settings(max_examples=15)
@given(plan=st.lists(st.sampled_from(["save", "delete", "load", "list"]), min_size=2, max_size=12))
def test_saves_racing_deletes_never_fail_and_keep_versions_contiguous(
    tmp_path_factory: pytest.TempPathFactory, plan: list[str]
) -> None:
    """Saves, loads and deletes of one file racing in worker threads: none raises, and the
    versions left are 0..n-1 and all readable (a save is never numbered in a deleted directory).
    """
    root = tmp_path_factory.mktemp("race")

    async def scenario() -> None:
        service = FileArtifactService(root)

        async def act(op: str, n: int) -> None:
            if op == "save":
                await service.save_artifact(**WHERE, filename="f", artifact=Part.from_text(str(n)))
            elif op == "delete":
                await service.delete_artifact(**WHERE, filename="f")
            elif op == "load":
                await service.load_artifact(**WHERE, filename="f")
            else:
                await service.list_artifact_keys(**WHERE)

        async with trio.open_nursery() as nursery:
            for n, op in enumerate(plan):
                nursery.start_soon(act, op, n)
        left = await service.list_versions(**WHERE, filename="f")
        assert left == list(range(len(left)))
        for version in left:
            assert await service.load_artifact(**WHERE, filename="f", version=version) is not None

    trio.run(scenario)


def test_a_save_whose_directory_vanishes_is_retried_in_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a delete between ``mkstemp`` and ``link`` does to a save: the retry lands at 0."""
    directory = tmp_path / "f"
    directory.mkdir()
    (directory / "0.json").write_text("{}")
    (directory / "1.json").write_text("{}")
    real_link = os.link
    targets: list[str] = []

    def racing_link(source: str, target: Path) -> None:
        if not targets:  # the first attempt: a delete takes the directory away
            directory.rename(tmp_path / ".deleted-x")
        targets.append(target.name)
        real_link(source, target)

    monkeypatch.setattr(os, "link", racing_link)
    assert _publish(directory, b'{"text": "new"}') == 0
    monkeypatch.undo()
    assert targets == ["2.json", "0.json"]
    assert sorted(p.name for p in directory.iterdir()) == ["0.json"]
    assert _publish_once(directory, b"{}") == 1


@pytest.mark.parametrize(
    "filename",
    ["../escape", "/etc/passwd", "a/b", "a\\b", "nul\x00", "..", ".", "", "user:..", "user:"],
)
async def test_hostile_filenames_are_refused_and_nothing_is_written(
    tmp_path: Path, filename: str
) -> None:
    service = FileArtifactService(tmp_path / "root")
    with pytest.raises(ConfigurationError, match="invalid artifact filename"):
        await service.save_artifact(**WHERE, filename=filename, artifact=Part.from_text("x"))
    with pytest.raises(ConfigurationError, match="invalid artifact filename"):
        await service.load_artifact(**WHERE, filename=filename)
    with pytest.raises(ConfigurationError, match="invalid artifact filename"):
        await service.delete_artifact(**WHERE, filename=filename)
    assert not (tmp_path / "root").exists()


async def test_a_name_too_long_for_the_filesystem_is_a_clear_error(tmp_path: Path) -> None:
    service = FileArtifactService(tmp_path)
    with pytest.raises(ConfigurationError, match=r"artifact filename .* too long"):
        await service.save_artifact(**WHERE, filename="é" * 50, artifact=Part.from_text("x"))
    with pytest.raises(ConfigurationError, match=r"session id .* too long"):
        await service.list_artifact_keys(app_name="a", user_id="u", session_id="s" * 300)
    longest = "x" * 255
    assert await service.save_artifact(**WHERE, filename=longest, artifact=Part.from_text("")) == 0


async def test_odd_ids_are_encoded_and_stay_under_the_root(tmp_path: Path) -> None:
    service = FileArtifactService(tmp_path / "root")
    odd = {"app_name": "..", "user_id": "u/../../x", "session_id": ""}
    await service.save_artifact(**odd, filename="user:prefs", artifact=Part.from_text("p"))
    await service.save_artifact(**odd, filename=".hidden", artifact=Part.from_text("h"))
    await service.save_artifact(**odd, filename="100%", artifact=Part.from_text("%"))
    other = {**odd, "session_id": "s:2"}
    assert await service.list_artifact_keys(**other) == ["user:prefs"]
    assert await service.list_artifact_keys(**odd) == [".hidden", "100%", "user:prefs"]
    assert await trio.to_thread.run_sync(_all_under, tmp_path / "root")
    assert sorted(os.listdir(tmp_path)) == ["root"]


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _find(root: Path, name: str) -> Path:
    (found,) = root.rglob(name)
    return found


def _leave_debris(root: Path, name: str) -> None:
    """What a writer that died before publishing leaves behind."""
    directory = _find(root, name)
    (directory / ".tmp-crashed.part").write_bytes(b'{"text": "half')
    (directory / "7.json.tmp").write_bytes(b"junk")


def _all_under(root: Path) -> bool:
    return all(root in path.resolve().parents for path in root.rglob("*"))


async def test_a_version_written_before_records_existed_reads_without_metadata(
    tmp_path: Path,
) -> None:
    """A version file holding only the part (the earlier format) still loads; its record has no
    custom metadata and the file's modification time as its creation time."""
    service = FileArtifactService(tmp_path)
    await service.save_artifact(
        **WHERE, filename="old.txt", artifact=Part.from_text("o"), custom_metadata={"k": 1}
    )
    (path,) = await trio.to_thread.run_sync(_files_under, tmp_path)
    stored = json.loads(await trio.to_thread.run_sync(path.read_text))
    assert stored.pop("artifactVersion")["customMetadata"] == {"k": 1}
    await trio.to_thread.run_sync(path.write_text, json.dumps(stored))
    await trio.to_thread.run_sync(os.utime, path, (1_000_000.0, 1_000_000.0))
    assert await service.load_artifact(**WHERE, filename="old.txt") == Part.from_text("o")
    (record,) = await service.list_artifact_versions(**WHERE, filename="old.txt")
    assert (record.custom_metadata, record.create_time) == ({}, 1_000_000.0)
    assert record.canonical_uri == path.absolute().as_uri()
