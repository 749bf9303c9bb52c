"""The contract every :class:`MemoryService` backend honours.

Runs once per backend of ``conftest.MEMORY_FACTORIES``. Rules: ADK-SEMANTICS §2.5 and R-MEM-1
(entries carry the event's content, author, ISO timestamp and id; scoped to app and user;
re-adding a session replaces it; at most 10 results, more matched words first), and the
``MemoryService`` docstrings (any query is valid; ``search_memory`` is a checkpoint).
"""

from __future__ import annotations

import re
import unicodedata

import trio
import trio.testing
from hypothesis import example, given, strategies as st

from trio_agents import Content, Event, Part, Session
from trio_agents.memory import MemoryService, SearchMemoryResponse
from trio_agents.memory._base import script_runs  # the documented mixed-script cut

from .conftest import MemoryFactory


def session(sid: str, *texts: str, app: str = "app", user: str = "u") -> Session:
    """A session whose events say ``texts`` in turn (user, bot, user, ...), plus noise."""
    events = [
        Event(
            id=f"{sid}-{i}",
            author="user" if i % 2 == 0 else "bot",
            timestamp=1_700_000_000 + i,
            content=Content.from_text(text, role="user" if i % 2 == 0 else "model"),
        )
        for i, text in enumerate(texts)
    ]
    events.append(Event(id=f"{sid}-empty", author="bot"))  # no content: never remembered
    call = Content(role="model", parts=[Part.from_function_call("lookup", {"q": "cat"})])
    events.append(Event(id=f"{sid}-call", author="bot", content=call))  # no text: never found
    return Session(id=sid, app_name=app, user_id=user, events=events)


async def search(svc: MemoryService, query: str, *, app: str = "app", user: str = "u") -> list[str]:
    found = await svc.search_memory(app_name=app, user_id=user, query=query)
    return [m.text for m in found.memories]


async def test_an_entry_is_the_event_with_author_time_and_id_r_mem_1(
    memory_service: MemoryService,
) -> None:
    await memory_service.add_session_to_memory(session("s1", "My cat is called Tom", "Nice cat!"))
    found = await memory_service.search_memory(
        app_name="app", user_id="u", query="what is my cat called"
    )
    first = found.memories[0]
    assert first.content == Content.from_text("My cat is called Tom", role="user")
    assert (first.author, first.id) == ("user", "s1-0")
    assert first.timestamp == "2023-11-14T22:13:20+00:00"
    assert first.custom_metadata["session_id"] == "s1"


async def test_memory_is_scoped_to_app_and_user_r_mem_1(memory_service: MemoryService) -> None:
    await memory_service.add_session_to_memory(session("s1", "secret plan alpha"))
    await memory_service.add_session_to_memory(session("s2", "secret plan beta", user="other"))
    await memory_service.add_session_to_memory(session("s3", "secret plan gamma", app="app2"))
    assert await search(memory_service, "secret plan") == ["secret plan alpha"]
    assert await search(memory_service, "secret", user="other") == ["secret plan beta"]
    assert await search(memory_service, "secret", user="nobody") == []


async def test_every_session_of_the_user_is_searched(memory_service: MemoryService) -> None:
    await memory_service.add_session_to_memory(session("s1", "tea in the morning"))
    await memory_service.add_session_to_memory(session("s2", "coffee in the morning"))
    assert sorted(await search(memory_service, "morning")) == [
        "coffee in the morning",
        "tea in the morning",
    ]


async def test_adding_a_session_again_replaces_it_r_mem_1(memory_service: MemoryService) -> None:
    await memory_service.add_session_to_memory(session("s1", "old fact about trains"))
    await memory_service.add_session_to_memory(session("s1", "new fact about planes"))
    await memory_service.add_session_to_memory(session("s1", "new fact about planes"))
    assert await search(memory_service, "trains") == []
    assert await search(memory_service, "planes fact") == ["new fact about planes"]


async def test_more_matching_words_rank_first_and_results_are_bounded_r_mem_1(
    memory_service: MemoryService,
) -> None:
    many = [f"apple number {i}" for i in range(15)]
    await memory_service.add_session_to_memory(session("s1", *many, "apple pie recipe"))
    found = await search(memory_service, "apple pie")
    assert found[0] == "apple pie recipe"
    assert len(found) == memory_service.limit == 10


async def test_case_and_punctuation_do_not_matter(memory_service: MemoryService) -> None:
    await memory_service.add_session_to_memory(session("s1", "Meeting with ALICE, on Friday."))
    assert await search(memory_service, "alice?") == ["Meeting with ALICE, on Friday."]
    assert await search(memory_service, "FRIDAY!!") == ["Meeting with ALICE, on Friday."]


async def test_a_latin_word_inside_a_japanese_sentence_is_found(
    memory_service: MemoryService,
) -> None:
    """ADK 2.13 splits mixed-script words: 私はPythonを使う is found by "python"."""
    await memory_service.add_session_to_memory(session("s1", "私はPythonを使う"))
    assert await search(memory_service, "python") == ["私はPythonを使う"]


async def test_composed_and_decomposed_accents_match(memory_service: MemoryService) -> None:
    """Text and queries are NFC-normalised: "é" typed either way is the same letter."""
    await memory_service.add_session_to_memory(session("s1", "caf\u00e9 open"))
    assert await search(memory_service, "cafe\u0301") == ["caf\u00e9 open"]


async def test_thoughts_are_not_searched(memory_service: MemoryService) -> None:
    content = Content(role="model", parts=[Part(text="hidden musing", thought=True)])
    events = [Event(id="t", author="bot", timestamp=1.0, content=content)]
    await memory_service.add_session_to_memory(
        Session(id="s", app_name="app", user_id="u", events=events)
    )
    assert await search(memory_service, "musing") == []


async def test_nothing_matches_nothing(memory_service: MemoryService) -> None:
    assert await search(memory_service, "zebra") == []  # empty store
    await memory_service.add_session_to_memory(session("s1", "hello world"))
    assert await search(memory_service, "zebra") == []
    assert await search(memory_service, "hello", app="other") == []


async def test_search_and_add_are_checkpoints(memory_service: MemoryService) -> None:
    with trio.testing.assert_checkpoints():
        await memory_service.add_session_to_memory(session("s1", "x"))
    for query in ("x", "", "!!"):
        with trio.testing.assert_checkpoints():
            await memory_service.search_memory(app_name="app", user_id="u", query=query)


TEXTS = ['an émigré wrote "x y" AND (z*)', "NEAR col:val ^start", "plain words here"]
SYNTAX = ['"', "AND", "OR", "NOT", "(", ")", "*", "^", ":", "NEAR(", "-", "+", "'", "\\"]
query_pieces = st.one_of(
    st.sampled_from([w for t in TEXTS for w in re.findall(r"\w+", t)]),
    st.sampled_from(SYNTAX),
    st.text(max_size=4),
)
queries = st.lists(st.tuples(query_pieces, st.sampled_from([" ", "", '"', "-", ","]))).map(
    lambda pairs: "".join(p + sep for p, sep in pairs)
)


def fold(text: str) -> str:
    """Case, accents and modifier letters away (at least as much as any backend folds: FTS5's
    unicode61 tokenizer, for one, drops modifier letters such as "ʰ")."""
    kept = "".join(c for c in text if unicodedata.category(c) != "Lm")
    decomposed = unicodedata.normalize("NFKD", kept).casefold()
    return "".join(c for c in decomposed if unicodedata.category(c) not in ("Mn", "Mc", "Me", "Lm"))


@given(query=queries)
@example(query="anª ")  # ª is not Latin: the service cuts "anª" into "an" and "ª"
def test_any_query_is_valid_and_finds_exactly_what_shares_its_words(
    memory_factory: MemoryFactory, query: str
) -> None:
    """Quotes, FTS5 operators (AND, NEAR, *, ^, :), brackets, control characters: never an
    error. A text holding a whole word of the query is found; a text found holds a piece of it.
    """

    async def scenario() -> None:
        async with memory_factory() as service:
            await service.add_session_to_memory(session("s1", *TEXTS))
            found = {m.text for m in (await _search_response(service, query)).memories}
        asked = {w.lower() for w in re.findall(r"\w+", unicodedata.normalize("NFC", query))}
        for text in TEXTS:
            if asked & {w.lower() for w in re.findall(r"\w+", text)}:
                assert text in found
        words = [w for w in re.split(r"[\W_]+", unicodedata.normalize("NFC", query)) if w]
        pieces = [fold(run) for w in words for run in script_runs(w)]  # mixed scripts are cut
        for text in found:
            assert any(p in fold(text) for p in pieces), text

    trio.run(scenario)


async def _search_response(service: MemoryService, query: str) -> SearchMemoryResponse:
    return await service.search_memory(app_name="app", user_id="u", query=query)


async def test_add_events_to_memory_adds_to_what_is_remembered(
    memory_service: MemoryService,
) -> None:
    """As google-adk 2.13's in-memory service: events add to their session's memories (or, with
    no session id, to the user's session-less ones) without replacing them; an event id already
    remembered there is skipped; the same id under another session is kept."""
    svc = memory_service
    await svc.add_session_to_memory(session("s1", "zebra in session"))

    def said(eid: str, text: str) -> Event:
        return Event(id=eid, author="user", timestamp=1.0, content=Content.from_text(text))

    turn = [said("a", "zebra one"), said("b", "zebra two"), said("c", "")]
    await svc.add_events_to_memory(app_name="app", user_id="u", events=turn)
    await svc.add_events_to_memory(
        app_name="app", user_id="u", events=[said("b", "zebra changed"), said("d", "zebra four")]
    )
    await svc.add_events_to_memory(
        app_name="app", user_id="u", events=[said("a", "zebra again")], session_id="s1"
    )
    found = await svc.search_memory(app_name="app", user_id="u", query="zebra")
    assert sorted(m.text for m in found.memories) == [
        "zebra again",
        "zebra four",
        "zebra in session",
        "zebra one",
        "zebra two",
    ]
    by_text = {m.text: m for m in found.memories}
    assert "session_id" not in by_text["zebra one"].custom_metadata
    assert by_text["zebra again"].custom_metadata["session_id"] == "s1"
    await svc.add_session_to_memory(session("s1", "zebra replaced"))
    assert "zebra again" not in await search(svc, "zebra")
    assert await search(svc, "zebra", user="other") == []
