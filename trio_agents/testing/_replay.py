"""Record real model traffic once (:class:`RecordingModel`), replay it offline.

A recording is one JSON file::

    {"format": "trio_agents.recording/1",
     "entries": {"<request key>": {"model": "...", "request": "<summary>",
                                   "answers": [[<chunk>, ...], ...]}}}

keyed by :func:`request_key`, a SHA-256 of the request's canonical JSON. Each answer is the list
of chunks the model sent (one chunk when it was not streamed; the last one is the final answer).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from .._content import Content
from .._errors import ConfigurationError, ModelError
from .._serde import structure, unstructure
from ..models._base import LlmRequest, LlmResponse, Model
from ..models._request_key import request_key

__all__ = ["RecordingModel", "ReplayMissError", "ReplayModel"]

FORMAT = "trio_agents.recording/1"


class ReplayMissError(ModelError):
    """:class:`ReplayModel` has no recorded answer for a request.

    ``key`` is the request's :func:`request_key`, ``summary`` a one-line description of the
    request, ``path`` the recording that was searched.
    """

    def __init__(self, *, key: str, summary: str, path: str) -> None:
        super().__init__(
            f"no recorded answer for request {key[:16]} ({summary}) in {path}; "
            "record it by running the test once with RecordingModel"
        )
        self.key = key
        self.summary = summary
        self.path = path


def _summary(request: LlmRequest) -> str:
    """``model 'm', 3 contents, last user: 'What is ...', tools: a, b`` (for error messages)."""
    pieces = [f"model {request.model!r}", f"{len(request.contents)} contents"]
    if request.contents:
        pieces.append(f"last {_describe_content(request.contents[-1])}")
    if request.tools:
        pieces.append("tools: " + ", ".join(t.name for t in request.tools))
    return ", ".join(pieces)


def _describe_content(content: Content) -> str:
    text = content.text
    if text:
        shown = text if len(text) <= 60 else text[:57] + "..."
        return f"{content.role}: {shown!r}"
    kinds = [
        "call " + p.function_call.name
        if p.function_call
        else "response " + p.function_response.name
        if p.function_response
        else "part"
        for p in content.parts
    ]
    return f"{content.role}: " + ", ".join(kinds or ["(empty)"])


# -- the file -------------------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any]:
    """The entries of the recording at ``path`` ({} when there is no file yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"recording {path} is not JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ConfigurationError(f"recording {path} is not a {FORMAT} file")
    entries: dict[str, Any] = document.get("entries", {})
    return entries


def _save(path: Path, entries: Mapping[str, Any]) -> None:
    """Write atomically: a temporary file in the same directory, flushed, then renamed."""
    text = json.dumps({"format": FORMAT, "entries": entries}, indent=1, sort_keys=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


# -- recording ------------------------------------------------------------------------------------


class _Tap(trio.abc.ReceiveChannel[LlmResponse]):
    """Passes a stream's chunks through and keeps a copy of each."""

    def __init__(self, source: trio.abc.ReceiveChannel[LlmResponse]) -> None:
        self._source = source
        self.chunks: list[LlmResponse] = []
        self.ended = False

    async def receive(self) -> LlmResponse:
        try:
            chunk = await self._source.receive()
        except trio.EndOfChannel:
            self.ended = True
            raise
        self.chunks.append(chunk)
        return chunk

    async def aclose(self) -> None:
        await self._source.aclose()

    @property
    def complete(self) -> bool:
        return self.ended or bool(self.chunks and not self.chunks[-1].partial)


class RecordingModel(Model):
    """Passes every request to ``inner`` and records its answers in the JSON file at ``path``.

    Answers are keyed by :func:`request_key`; a streamed answer keeps every chunk. The file is
    rewritten atomically after each answer, so an interrupted test leaves a valid recording. A
    request asked again in the same recording session appends a second answer (replayed in
    order); the first answer recorded for a key replaces what an earlier session recorded for it,
    so recording again refreshes the file. Failed or cancelled calls are not recorded.
    """

    def __init__(self, inner: Model, path: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.model = inner.model
        self.path = Path(path)
        self._entries = _load(self.path)
        self._refreshed: set[str] = set()
        self._lock = trio.Lock()

    async def _record(self, key: str, request: LlmRequest, chunks: list[LlmResponse]) -> None:
        async with self._lock:
            if key not in self._refreshed:
                self._refreshed.add(key)
                self._entries[key] = {
                    "model": request.model,
                    "request": _summary(request),
                    "answers": [],
                }
            self._entries[key]["answers"].append([unstructure(c) for c in chunks])
            await trio.to_thread.run_sync(_save, self.path, self._entries)

    async def generate(self, request: LlmRequest) -> LlmResponse:
        key = request_key(request)
        response = await self.inner.generate(request)
        await self._record(key, request, [response])
        return response

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[LlmResponse]]:
        key = request_key(request)
        async with self.inner.stream(request) as source:
            tap = _Tap(source)
            yield tap
        if tap.complete:
            await self._record(key, request, tap.chunks)

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- replay ---------------------------------------------------------------------------------------


class ReplayModel(Model):
    """Answers from a recording made by :class:`RecordingModel`, offline.

    ``model`` defaults to the model name of the recording (a recording of several models needs
    one ``ReplayModel(path, model=...)`` per model: the name is part of the request key). A
    request that was not recorded raises :class:`ReplayMissError` naming it. A request recorded
    with several answers gets them in order, then the last one again. Every request received is
    kept in :attr:`requests`.
    """

    def __init__(self, path: str | os.PathLike[str], *, model: str | None = None) -> None:
        self.path = Path(path)
        self._entries = _load(self.path)
        self.model = model if model is not None else self._recorded_model()
        self.requests: list[LlmRequest] = []
        self._served: dict[str, int] = {}

    def _recorded_model(self) -> str:
        names = sorted({str(e.get("model") or "") for e in self._entries.values()})
        if len(names) > 1:
            raise ConfigurationError(
                f"recording {self.path} holds several models {names}; "
                "pass ReplayModel(path, model=...) for each"
            )
        return names[0] if names else "replay"

    async def _answer(self, request: LlmRequest) -> list[LlmResponse]:
        await trio.lowlevel.checkpoint()
        self.requests.append(attrs.evolve(request, contents=list(request.contents)))
        key = request_key(request)
        entry = self._entries.get(key)
        if entry is None or not entry["answers"]:
            where = str(self.path) if self.path.exists() else f"{self.path} (no such file)"
            raise ReplayMissError(key=key, summary=_summary(request), path=where)
        answers = entry["answers"]
        served = self._served.get(key, 0)
        self._served[key] = served + 1
        chunks = answers[min(served, len(answers) - 1)]
        return [
            structure(c, LlmResponse, path=f"{self.path.name}[{key[:16]}][{i}]")
            for i, c in enumerate(chunks)
        ]

    async def generate(self, request: LlmRequest) -> LlmResponse:
        return (await self._answer(request))[-1]

    @contextlib.asynccontextmanager
    async def stream(
        self, request: LlmRequest
    ) -> AsyncIterator[trio.MemoryReceiveChannel[LlmResponse]]:
        chunks = await self._answer(request)
        send, receive = trio.open_memory_channel[LlmResponse](len(chunks))
        with send:
            for chunk in chunks:
                send.send_nowait(chunk)
        with receive:
            yield receive
