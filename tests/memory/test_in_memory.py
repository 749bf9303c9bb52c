"""InMemoryMemoryService is ADK 2.13's keyword matching, exactly (R-MEM-1).

What the SQLite backend does differently (bm25 ranking, folded accents, no substring matches)
is in ``test_sqlite.py``; what both do is in ``test_contract.py``.
"""

from __future__ import annotations

import re
import unicodedata

import trio
from hypothesis import given, strategies as st

from trio_agents import Content, Event, Session
from trio_agents.memory import InMemoryMemoryService


def session(sid: str, *texts: str) -> Session:
    events = [
        Event(id=f"{sid}-{i}", author="user", timestamp=float(i), content=Content.from_text(t))
        for i, t in enumerate(texts)
    ]
    return Session(id=sid, app_name="app", user_id="u", events=events)


async def ids(service: InMemoryMemoryService, query: str) -> list[str | None]:
    found = await service.search_memory(app_name="app", user_id="u", query=query)
    return [m.id for m in found.memories]


async def test_ties_keep_the_order_sessions_and_events_were_added_r_mem_1() -> None:
    service = InMemoryMemoryService()
    await service.add_session_to_memory(session("a", "red", "red blue"))
    await service.add_session_to_memory(session("b", "red", "blue red"))
    assert await ids(service, "red") == ["a-0", "a-1", "b-0", "b-1"]
    assert await ids(service, "red blue") == ["a-1", "b-1", "a-0", "b-0"]


async def test_re_adding_a_session_keeps_its_place_r_mem_1() -> None:
    """ADK replaces the session's entry in its dict, so the session keeps its position."""
    service = InMemoryMemoryService()
    await service.add_session_to_memory(session("a", "red one"))
    await service.add_session_to_memory(session("b", "red two"))
    await service.add_session_to_memory(session("a", "red one", "red three"))
    assert await ids(service, "red") == ["a-0", "a-1", "b-0"]


async def test_a_non_ascii_query_word_matches_inside_a_word() -> None:
    """Languages written without spaces: 使う is found inside 私はPythonを使う (ADK 2.13)."""
    service = InMemoryMemoryService()
    await service.add_session_to_memory(session("s", "私はPythonを使う", "python"))
    assert await ids(service, "使う") == ["s-0"]
    assert await ids(service, "thon") == []  # ASCII words match whole words only


async def test_accents_are_not_folded() -> None:
    service = InMemoryMemoryService()
    await service.add_session_to_memory(session("s", "an émigré"))
    assert await ids(service, "emigre") == []
    assert await ids(service, "ÉMIGRÉ") == ["s-0"]


VOCAB = ["red", "blue", "green", "Red", "émigré", "x_y", "7"]
sentences = st.lists(st.sampled_from(VOCAB), max_size=5).map(" ".join)


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\w+", unicodedata.normalize("NFC", text))}


@given(
    adds=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(sentences, max_size=6)), max_size=6
    ),
    query=sentences,
)
def test_search_is_adks_keyword_scoring_r_mem_1(
    adds: list[tuple[str, list[str]]], query: str
) -> None:
    """Against a model of R-MEM-1: score = query words in the event; best first, ties in
    insertion order (a session keeps the place of its first add); at most 10; no zero scores."""
    expected_sessions: dict[str, list[str]] = {}
    for sid, texts in adds:
        expected_sessions[sid] = [f"{sid}-{i}" for i, t in enumerate(texts) if t.strip()]
    text_of = {f"{sid}-{i}": t for sid, texts in adds for i, t in enumerate(texts)}
    wanted = _words(query)
    scored = [
        (len(wanted & _words(text_of[eid])), eid)
        for eids in expected_sessions.values()
        for eid in eids
    ]
    ranked = [eid for score, eid in sorted(scored, key=lambda p: -p[0]) if score][:10]

    async def scenario() -> list[str | None]:
        service = InMemoryMemoryService()
        for sid, texts in adds:
            await service.add_session_to_memory(session(sid, *texts))
        return await ids(service, query)

    assert trio.run(scenario) == ranked


async def test_delete_memory_forgets_for_good() -> None:
    """As google-adk 2.13's ``InMemoryMemoryService.delete_memory``: the entry with that id goes,
    in every session of the user, and adding it again (with its session or as an event) does not
    bring it back; no id, or an unknown one, changes nothing."""
    service = InMemoryMemoryService()
    await service.add_session_to_memory(session("s1", "apple pie", "apple tart"))
    await service.add_events_to_memory(
        app_name="app", user_id="u", events=[session("s2", "apple juice").events[0]]
    )
    await service.delete_memory(app_name="app", user_id="u", memory_id=None)
    await service.delete_memory(app_name="app", user_id="u", memory_id="nope")
    assert await ids(service, "apple") == ["s1-0", "s1-1", "s2-0"]
    await service.delete_memory(app_name="app", user_id="u", memory_id="s1-0")
    await service.delete_memory(app_name="app", user_id="u", memory_id="s2-0")
    assert await ids(service, "apple") == ["s1-1"]
    await service.add_session_to_memory(session("s1", "apple pie", "apple tart"))
    await service.add_events_to_memory(
        app_name="app", user_id="u", events=[session("s2", "apple juice").events[0]]
    )
    assert await ids(service, "apple") == ["s1-1"]
