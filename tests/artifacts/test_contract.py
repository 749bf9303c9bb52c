"""The contract every :class:`ArtifactService` backend honours.

The suite runs once per backend (the ``artifact_service`` fixture over
``conftest.ARTIFACT_SERVICE_FACTORIES``). Rules cited: ADK-SEMANTICS §2.4 and §3.16 (R-ART-1,
R-ART-2), the ``test_artifact_service`` row of §4.1, the ``ArtifactService`` docstrings (an
explicit version that does not exist is an :class:`ArtifactNotFoundError`; bad filenames are a
:class:`ConfigurationError`) and STYLE-ANCHORS §4.7 (every public async method of a service is a
checkpoint).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from trio_agents import (
    ArtifactNotFoundError,
    ConfigurationError,
    Part,
    SerializationError,
    TrioAgentsError,
)
from trio_agents.artifacts import ArtifactService

APP = "app"
USER = "u"
SESSION = "s1"


def text(value: str) -> Part:
    return Part.from_text(value)


async def save(
    svc: ArtifactService,
    filename: str,
    part: Part,
    *,
    app: str = APP,
    user: str = USER,
    session: str = SESSION,
) -> int:
    return await svc.save_artifact(
        app_name=app, user_id=user, session_id=session, filename=filename, artifact=part
    )


async def load(
    svc: ArtifactService,
    filename: str,
    version: int | None = None,
    *,
    app: str = APP,
    user: str = USER,
    session: str = SESSION,
) -> Part | None:
    return await svc.load_artifact(
        app_name=app, user_id=user, session_id=session, filename=filename, version=version
    )


async def keys(
    svc: ArtifactService, *, app: str = APP, user: str = USER, session: str = SESSION
) -> list[str]:
    return await svc.list_artifact_keys(app_name=app, user_id=user, session_id=session)


async def versions(
    svc: ArtifactService,
    filename: str,
    *,
    app: str = APP,
    user: str = USER,
    session: str = SESSION,
) -> list[int]:
    return await svc.list_versions(
        app_name=app, user_id=user, session_id=session, filename=filename
    )


async def delete(
    svc: ArtifactService,
    filename: str,
    *,
    app: str = APP,
    user: str = USER,
    session: str = SESSION,
) -> None:
    await svc.delete_artifact(app_name=app, user_id=user, session_id=session, filename=filename)


# -- empty store -----------------------------------------------------------------------------------


async def test_empty_store_r_art_1(artifact_service: ArtifactService) -> None:
    """test_load_empty: a missing file loads as None and has no versions and no key."""
    assert await load(artifact_service, "nothing.txt") is None
    assert await versions(artifact_service, "nothing.txt") == []
    assert await keys(artifact_service) == []


# -- versions (R-ART-1) ----------------------------------------------------------------------------


async def test_versions_count_from_zero_per_file_r_art_1(artifact_service: ArtifactService) -> None:
    assert [await save(artifact_service, "a.txt", text(f"a{i}")) for i in range(3)] == [0, 1, 2]
    assert await save(artifact_service, "b.txt", text("b0")) == 0
    assert await versions(artifact_service, "a.txt") == [0, 1, 2]
    assert await versions(artifact_service, "b.txt") == [0]


async def test_load_latest_or_a_given_version_r_art_1(artifact_service: ArtifactService) -> None:
    for i in range(3):
        await save(artifact_service, "a.txt", text(f"a{i}"))
    assert await load(artifact_service, "a.txt") == text("a2")
    assert [await load(artifact_service, "a.txt", v) for v in range(3)] == [
        text("a0"),
        text("a1"),
        text("a2"),
    ]


@pytest.mark.parametrize("version", [3, 99, -1])
async def test_a_version_that_does_not_exist_is_not_found(
    artifact_service: ArtifactService, version: int
) -> None:
    for i in range(3):
        await save(artifact_service, "a.txt", text(f"a{i}"))
    with pytest.raises(ArtifactNotFoundError) as info:
        await load(artifact_service, "a.txt", version)
    error = info.value
    assert isinstance(error, LookupError)
    assert isinstance(error, TrioAgentsError)
    assert (error.filename, error.version) == ("a.txt", version)
    assert "'a.txt'" in str(error)


async def test_a_version_of_a_missing_file_is_not_found(artifact_service: ArtifactService) -> None:
    with pytest.raises(ArtifactNotFoundError):
        await load(artifact_service, "missing.txt", 0)


@pytest.mark.parametrize(
    "part",
    [
        pytest.param(Part.from_text("héllo wörld\n"), id="text"),
        pytest.param(Part.from_bytes(bytes(range(256)), "application/octet-stream"), id="bytes"),
        pytest.param(Part.from_bytes(b"\x89PNG\r\n\x1a\n", "image/png"), id="image"),
    ],
)
async def test_parts_round_trip_unchanged(artifact_service: ArtifactService, part: Part) -> None:
    await save(artifact_service, "f", part)
    assert await load(artifact_service, "f") == part
    assert await load(artifact_service, "f", 0) == part


async def test_saving_something_that_is_not_a_part_is_refused(
    artifact_service: ArtifactService,
) -> None:
    bad: Any = {"text": "not a Part"}
    with pytest.raises(ConfigurationError, match="Part"):
        await save(artifact_service, "f.txt", bad)
    assert await versions(artifact_service, "f.txt") == []


# -- keys (R-ART-1) --------------------------------------------------------------------------------


async def test_keys_are_sorted_and_listed_once_r_art_1(artifact_service: ArtifactService) -> None:
    for name in ("b.txt", "a.txt", "c.txt", "a.txt"):
        await save(artifact_service, name, text(name))
    assert await keys(artifact_service) == ["a.txt", "b.txt", "c.txt"]


async def test_keys_include_the_users_files_r_art_1(artifact_service: ArtifactService) -> None:
    await save(artifact_service, "mine.txt", text("session file"))
    await save(artifact_service, "user:profile", text("user file"), session="other")
    await save(artifact_service, "theirs.txt", text("other session"), session="other")
    assert await keys(artifact_service) == ["mine.txt", "user:profile"]
    assert await keys(artifact_service, session="other") == ["theirs.txt", "user:profile"]


async def test_keys_are_scoped_to_app_and_user(artifact_service: ArtifactService) -> None:
    await save(artifact_service, "a.txt", text("x"))
    await save(artifact_service, "user:p", text("x"))
    assert await keys(artifact_service, user="someone_else") == []
    assert await keys(artifact_service, app="other_app") == []


# -- scoping (R-ART-2) -----------------------------------------------------------------------------


async def test_session_files_are_separate_per_session_r_art_2(
    artifact_service: ArtifactService,
) -> None:
    assert await save(artifact_service, "notes.txt", text("s1 v0")) == 0
    assert await save(artifact_service, "notes.txt", text("s1 v1")) == 1
    assert await save(artifact_service, "notes.txt", text("s2 v0"), session="s2") == 0
    assert await load(artifact_service, "notes.txt") == text("s1 v1")
    assert await load(artifact_service, "notes.txt", session="s2") == text("s2 v0")
    assert await load(artifact_service, "notes.txt", session="s3") is None
    await delete(artifact_service, "notes.txt", session="s2")
    assert await versions(artifact_service, "notes.txt") == [0, 1]


async def test_user_files_are_shared_by_the_users_sessions_r_art_2(
    artifact_service: ArtifactService,
) -> None:
    assert await save(artifact_service, "user:prefs", text("v0")) == 0
    assert await save(artifact_service, "user:prefs", text("v1"), session="s2") == 1
    for session in (SESSION, "s2", "a-session-created-later"):
        assert await load(artifact_service, "user:prefs", session=session) == text("v1")
        assert await versions(artifact_service, "user:prefs", session=session) == [0, 1]
    assert await load(artifact_service, "user:prefs", user="v") is None
    assert await load(artifact_service, "user:prefs", app="other_app") is None
    await delete(artifact_service, "user:prefs", session="s2")
    assert await load(artifact_service, "user:prefs") is None


@pytest.mark.parametrize("name", ["User:prefs", "users:prefs", "a:b", "prefs.user:"])
async def test_only_the_exact_user_prefix_shares_a_file_r_art_2(
    artifact_service: ArtifactService, name: str
) -> None:
    await save(artifact_service, name, text("session scoped"))
    assert await load(artifact_service, name) == text("session scoped")
    assert await load(artifact_service, name, session="s2") is None


async def test_same_names_in_other_apps_and_users_are_independent(
    artifact_service: ArtifactService,
) -> None:
    await save(artifact_service, "f", text("app/u"))
    await save(artifact_service, "f", text("other/u"), app="other")
    await save(artifact_service, "f", text("app/v"), user="v")
    assert await load(artifact_service, "f") == text("app/u")
    assert await load(artifact_service, "f", app="other") == text("other/u")
    assert await load(artifact_service, "f", user="v") == text("app/v")
    assert await versions(artifact_service, "f") == [0]


# -- delete (R-ART-1) ------------------------------------------------------------------------------


async def test_delete_removes_every_version_r_art_1(artifact_service: ArtifactService) -> None:
    for i in range(3):
        await save(artifact_service, "a.txt", text(f"a{i}"))
    await save(artifact_service, "b.txt", text("b"))
    await delete(artifact_service, "a.txt")
    assert await load(artifact_service, "a.txt") is None
    assert await versions(artifact_service, "a.txt") == []
    assert await keys(artifact_service) == ["b.txt"]
    with pytest.raises(ArtifactNotFoundError):
        await load(artifact_service, "a.txt", 0)
    # A new file under the old name starts over.
    assert await save(artifact_service, "a.txt", text("again")) == 0


async def test_deleting_a_missing_file_is_a_no_op(artifact_service: ArtifactService) -> None:
    await delete(artifact_service, "never-saved.txt")
    await delete(artifact_service, "user:never-saved")
    assert await keys(artifact_service) == []


# -- filenames -------------------------------------------------------------------------------------

BAD_NAMES = ["", "user:", "a/b", "../up", "a\\b", "a\x00b", ".", "..", "user:.", "user:.."]


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_invalid_filenames_are_refused_by_every_method(
    artifact_service: ArtifactService, name: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        await save(artifact_service, name, text("x"))
    assert isinstance(info.value, ValueError)
    assert repr(name) in str(info.value)
    with pytest.raises(ConfigurationError):
        await load(artifact_service, name)
    with pytest.raises(ConfigurationError):
        await load(artifact_service, name, 0)
    with pytest.raises(ConfigurationError):
        await versions(artifact_service, name)
    with pytest.raises(ConfigurationError):
        await delete(artifact_service, name)
    assert await keys(artifact_service) == []


@pytest.mark.parametrize(
    "name", ["report.final.v2.pdf", "with space.txt", "ünïcödé.txt", "user:a.b", "..hidden", "a:b"]
)
async def test_unusual_but_valid_filenames_work(
    artifact_service: ArtifactService, name: str
) -> None:
    assert await save(artifact_service, name, text(name)) == 0
    assert await load(artifact_service, name) == text(name)
    assert await keys(artifact_service) == [name]


# -- Trio behaviour --------------------------------------------------------------------------------


async def test_every_method_is_a_checkpoint(artifact_service: ArtifactService) -> None:
    """STYLE-ANCHORS §4.7: cancellation and fairness behave the same on every backend."""
    with trio.testing.assert_checkpoints():
        await save(artifact_service, "a.txt", text("x"))
    with trio.testing.assert_checkpoints():
        await load(artifact_service, "a.txt")
    with trio.testing.assert_checkpoints():
        await load(artifact_service, "missing.txt")
    with trio.testing.assert_checkpoints():
        await keys(artifact_service)
    with trio.testing.assert_checkpoints():
        await versions(artifact_service, "a.txt")
    with trio.testing.assert_checkpoints():
        await delete(artifact_service, "a.txt")


async def test_concurrent_saves_get_distinct_versions(artifact_service: ArtifactService) -> None:
    got: list[int] = []

    async def saver(i: int) -> None:
        got.append(await save(artifact_service, "shared.txt", text(str(i))))

    async with trio.open_nursery() as nursery:
        for i in range(10):
            nursery.start_soon(saver, i)
    assert sorted(got) == list(range(10))
    stored = [await load(artifact_service, "shared.txt", v) for v in range(10)]
    assert sorted(p.text or "" for p in stored if p is not None) == sorted(map(str, range(10)))


# -- the whole contract as a model -----------------------------------------------------------------

SCOPES = [(APP, USER, "s1"), (APP, USER, "s2"), (APP, "v", "s1"), ("other", USER, "s1")]
operations = st.lists(
    st.tuples(
        st.sampled_from(["save", "save", "delete"]),
        st.integers(0, len(SCOPES) - 1),
        st.sampled_from(["a.txt", "b.txt", "user:p", "user:q"]),
    ),
    max_size=25,
)


@settings(deadline=None)
@given(ops=operations)
def test_store_behaves_like_a_dict_of_version_lists(
    artifact_service_factory: Any, ops: list[tuple[str, int, str]]
) -> None:
    """R-ART-1/2 as one property: after any mix of saves and deletes across sessions, users and
    apps, every scope reads what a plain dict-of-lists model predicts."""

    def owner(scope: tuple[str, str, str], filename: str) -> tuple[str, str, str, str]:
        app, user, session = scope
        return (app, user, "" if filename.startswith("user:") else session, filename)

    async def check() -> None:
        model: dict[tuple[str, str, str, str], list[Part]] = {}
        async with artifact_service_factory() as svc:
            for step, (op, index, filename) in enumerate(ops):
                app, user, session = scope = SCOPES[index]
                key = owner(scope, filename)
                if op == "save":
                    part = text(f"step {step}")
                    version = await save(svc, filename, part, app=app, user=user, session=session)
                    model.setdefault(key, []).append(part)
                    assert version == len(model[key]) - 1
                else:
                    await delete(svc, filename, app=app, user=user, session=session)
                    model.pop(key, None)
            for app, user, session in SCOPES:
                expected_keys = sorted(
                    name
                    for (a, u, s, name), parts in model.items()
                    if parts and (a, u) == (app, user) and s in ("", session)
                )
                assert await keys(svc, app=app, user=user, session=session) == expected_keys
                for filename in ("a.txt", "b.txt", "user:p", "user:q"):
                    parts = model.get(owner((app, user, session), filename), [])
                    where = {"app": app, "user": user, "session": session}
                    assert await versions(svc, filename, **where) == list(range(len(parts)))
                    assert await load(svc, filename, **where) == (parts[-1] if parts else None)
                    for v, part in enumerate(parts):
                        assert await load(svc, filename, v, **where) == part

    trio.run(check)


async def test_user_files_need_no_session_id(artifact_service: ArtifactService) -> None:
    """As google-adk 2.13 (in-memory and file stores): ``session_id`` defaults to None, which
    names the user's scope; a ``user:`` file saved without one is the one every session sees,
    and listing without a session id gives the ``user:`` files only."""
    svc = artifact_service
    assert (
        await svc.save_artifact(app_name=APP, user_id=USER, filename="user:p", artifact=text("a"))
        == 0
    )
    assert (
        await svc.save_artifact(app_name=APP, user_id=USER, filename="user:p", artifact=text("b"))
        == 1
    )
    await save(svc, "user:p", text("c"))
    await save(svc, "notes.txt", text("n"))
    loaded = await svc.load_artifact(app_name=APP, user_id=USER, filename="user:p", version=1)
    assert loaded == text("b")
    assert await svc.list_versions(app_name=APP, user_id=USER, filename="user:p") == [0, 1, 2]
    assert await svc.list_artifact_keys(app_name=APP, user_id=USER) == ["user:p"]
    assert await svc.list_artifact_keys(app_name=APP, user_id=USER, session_id=SESSION) == [
        "notes.txt",
        "user:p",
    ]
    await svc.delete_artifact(app_name=APP, user_id=USER, filename="user:p")
    assert await svc.load_artifact(app_name=APP, user_id=USER, filename="user:p") is None


async def test_session_file_without_session_id_is_refused(
    artifact_service: ArtifactService,
) -> None:
    """google-adk 2.13 refuses a session-scoped name without a session id (a ValueError):
    here a ConfigurationError naming the file, and nothing is stored."""
    with pytest.raises(ConfigurationError, match=r"notes\.txt"):
        await artifact_service.save_artifact(
            app_name=APP, user_id=USER, filename="notes.txt", artifact=text("n")
        )
    with pytest.raises(ConfigurationError, match=r"notes\.txt"):
        await artifact_service.load_artifact(app_name=APP, user_id=USER, filename="notes.txt")
    assert await artifact_service.list_artifact_keys(app_name=APP, user_id=USER) == []


async def test_an_empty_part_is_refused(artifact_service: ArtifactService) -> None:
    """google-adk 2.13 refuses to save a ``Part()`` with nothing in it (a ValueError): here a
    ConfigurationError naming the file; no version is made."""
    with pytest.raises(ConfigurationError, match=r"'e'") as info:
        await save(artifact_service, "e", Part())
    assert isinstance(info.value, ValueError)
    assert (
        await artifact_service.list_versions(
            app_name=APP, user_id=USER, session_id=SESSION, filename="e"
        )
        == []
    )


async def test_a_session_with_an_empty_id_does_not_share_the_users_files(
    artifact_service: ArtifactService,
) -> None:
    """The files of a session whose id is ``""`` are that session's, not the user's."""
    await save(artifact_service, "own.txt", text("o"), session="")
    await save(artifact_service, "user:p", text("p"), session="")
    assert await artifact_service.list_artifact_keys(app_name=APP, user_id=USER) == ["user:p"]
    assert await artifact_service.list_artifact_keys(
        app_name=APP, user_id=USER, session_id="other"
    ) == ["user:p"]


async def test_versions_keep_their_custom_metadata_and_mime_type(
    artifact_service: ArtifactService,
) -> None:
    """As google-adk 2.13: ``save_artifact(custom_metadata=...)`` is kept with the version;
    ``list_artifact_versions`` gives one record per version, oldest first (empty for no file),
    with its MIME type (``text/plain`` for text) and a creation time; ``get_artifact_version``
    gives the latest or one version, None for no file. Records are copies."""
    svc = artifact_service
    where = {"app_name": APP, "user_id": USER, "session_id": SESSION}
    await svc.save_artifact(**where, filename="a", artifact=text("x"), custom_metadata={"k": [1]})
    await svc.save_artifact(**where, filename="a", artifact=Part.from_bytes(b"\x01", "image/png"))
    records = await svc.list_artifact_versions(**where, filename="a")
    assert [(r.version, dict(r.custom_metadata), r.mime_type) for r in records] == [
        (0, {"k": [1]}, "text/plain"),
        (1, {}, "image/png"),
    ]
    assert records[0].create_time <= records[1].create_time
    assert records[0].canonical_uri != records[1].canonical_uri
    records[0].custom_metadata["k"].append(2)
    first = await svc.get_artifact_version(**where, filename="a", version=0)
    assert first is not None and first.custom_metadata == {"k": [1]}
    latest = await svc.get_artifact_version(**where, filename="a")
    assert latest is not None and latest.version == 1
    assert await svc.list_artifact_versions(**where, filename="none") == []
    assert await svc.get_artifact_version(**where, filename="none") is None
    with pytest.raises(ArtifactNotFoundError):
        await svc.get_artifact_version(**where, filename="a", version=7)
    assert await svc.load_artifact(**where, filename="a", version=0) == text("x")


async def test_custom_metadata_must_be_json(artifact_service: ArtifactService) -> None:
    """Metadata that cannot be stored is refused before anything is saved."""
    with pytest.raises(SerializationError, match="custom_metadata"):
        await artifact_service.save_artifact(
            app_name=APP,
            user_id=USER,
            session_id=SESSION,
            filename="a",
            artifact=text("x"),
            custom_metadata={"f": object()},
        )
    assert (
        await artifact_service.list_versions(
            app_name=APP, user_id=USER, session_id=SESSION, filename="a"
        )
        == []
    )
