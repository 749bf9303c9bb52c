"""OpenAIModel against a real OpenAI-compatible server: llama-cpp-python serving a tiny model.

The server runs from its own virtualenv (``.venv-llama``, built from source in about 9 minutes by
``scripts/llama_server/setup.sh``) on a random-weight 1-layer model that
``scripts/llama_server/make_tiny_gguf.py`` writes from a seed, so nothing is downloaded. Its text
is gibberish, but its tool calls are forced by ``tool_choice`` and a JSON-schema grammar, so the
HTTP, SSE, tool-call and cancellation paths are real. Opt-in::

    bash scripts/llama_server/setup.sh
    TRIO_AGENTS_LLAMA=1 .venv/bin/python -m pytest -q tests/integration
"""

from __future__ import annotations

import enum
import functools
import json
import os
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import trio

from trio_agents import (
    CallbackContext,
    Content,
    Event,
    InMemoryRunner,
    LlmAgent,
    RunConfig,
    StreamingMode,
)
from trio_agents.models import LlmRequest, OpenAIModel, RetryPolicy

ROOT = Path(__file__).resolve().parents[2]
LLAMA_PYTHON = ROOT / ".venv-llama" / "bin" / "python"
MAKE_GGUF = ROOT / "scripts" / "llama_server" / "make_tiny_gguf.py"
SETUP = "bash scripts/llama_server/setup.sh"
COMMAND = f"{SETUP} && TRIO_AGENTS_LLAMA=1 .venv/bin/python -m pytest -q tests/integration"

pytestmark = [
    pytest.mark.llama,
    pytest.mark.skipif(
        os.environ.get("TRIO_AGENTS_LLAMA") != "1",
        reason=f"needs a llama.cpp server; opt in with: {COMMAND}",
    ),
    # a cancelled stream may leave httpx's/httpcore's generators to the garbage collector
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore\.:ResourceWarning"),
]

SEED = 0
N_CTX = 4096
READY_TIMEOUT = 60.0
TEST_TIMEOUT = 60.0
END_OF_TURN = 4  # <|im_end|> in make_tiny_gguf's vocabulary
ALIAS = "tiny"


# -- the server ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _open_log(path: Path) -> IO[bytes]:
    return path.open("wb")


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
async def llama_url(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[str]:
    """The ``/v1`` base URL of a llama-cpp-python server on a fresh tiny model.

    The server runs in the test's nursery on a free loopback port and is killed at teardown.
    """
    if not LLAMA_PYTHON.exists():
        pytest.fail(f"{LLAMA_PYTHON} is missing: run `{SETUP}` first")
    model_file = tmp_path / "tiny.gguf"
    await trio.run_process(
        [LLAMA_PYTHON, MAKE_GGUF, model_file, "--seed", str(SEED)], capture_stdout=True
    )
    port = _free_port()
    log_path = tmp_path / "llama-server.log"
    command = [
        *(LLAMA_PYTHON, "-m", "llama_cpp.server", "--model", model_file),
        *("--model_alias", ALIAS, "--chat_format", "chatml-function-calling"),
        *("--n_ctx", str(N_CTX), "--host", "127.0.0.1", "--port", str(port)),
    ]
    with _open_log(log_path) as log:
        process: trio.Process = await nursery.start(
            functools.partial(
                trio.run_process,
                command,
                check=False,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        await _wait_until_ready(f"http://127.0.0.1:{port}/v1", process, log_path)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.kill()
        with trio.move_on_after(10, shield=True):
            await process.wait()


async def _wait_until_ready(url: str, process: trio.Process, log_path: Path) -> None:
    async with httpx.AsyncClient(timeout=2.0) as client:
        with trio.move_on_after(READY_TIMEOUT):
            while process.returncode is None:
                try:
                    if (await client.get(f"{url}/models")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await trio.sleep(0.1)
    if process.returncode is None:
        state = f"not ready after {READY_TIMEOUT} s"
    else:
        state = f"exited with status {process.returncode}"
    pytest.fail(f"the llama.cpp server is {state}; its log ends:\n{_tail(log_path)}")


class Recording(httpx.AsyncBaseTransport):
    """A real transport that keeps the JSON body of every request (to check the wire format)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.bodies.append(json.loads(request.content))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def make_model(url: str, transport: httpx.AsyncBaseTransport | None = None) -> OpenAIModel:
    retry = RetryPolicy(attempts=2, initial_delay=0.1, total_timeout=10)
    return OpenAIModel(ALIAS, base_url=url, read_timeout=30, retry=retry, transport=transport)


async def run_agent(
    runner: InMemoryRunner, session_id: str, message: str, streaming: StreamingMode
) -> list[Event]:
    with trio.fail_after(TEST_TIMEOUT):
        async with runner.run(
            user_id="u",
            session_id=session_id,
            new_message=message,
            run_config=RunConfig(streaming_mode=streaming, max_llm_calls=4),
        ) as events:
            return [e async for e in events]


async def stored_events(runner: InMemoryRunner, session_id: str) -> list[Event]:
    session = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session_id
    )
    assert session is not None
    return list(session.events)


# -- an agent with a forced tool -------------------------------------------------------------------


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


FORCED = {"type": "function", "function": {"name": "get_temperature"}}


def temperature(unit: Unit) -> dict[str, Any]:
    return {"temperature": 21 if unit is Unit.CELSIUS else 70, "unit": unit.value}


def tool_choice_once(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """Force the tool on the first call only: once the result is in, the model answers in text
    (otherwise a forced ``tool_choice`` would have it call the tool on every step)."""
    last = llm_request.contents[-1]
    if any(p.function_response is not None for p in last.parts):
        llm_request.generation_config["tool_choice"] = "none"


@pytest.mark.parametrize("streaming", [StreamingMode.NONE, StreamingMode.SSE])
async def test_agent_calls_a_forced_tool_and_answers(
    llama_url: str, streaming: StreamingMode
) -> None:
    ran: list[Unit] = []

    def get_temperature(unit: Unit) -> dict[str, Any]:
        """The temperature outside, in the given unit."""
        ran.append(unit)
        return temperature(unit)

    transport = Recording()
    async with make_model(llama_url, transport) as model:
        agent = LlmAgent(
            name="weather",
            model=model,
            instruction="Report the temperature.",
            tools=[get_temperature],
            generate_content_config={
                "tool_choice": FORCED,
                "max_output_tokens": 24,
                "seed": SEED,
            },
            before_model_callback=tool_choice_once,
        )
        runner = InMemoryRunner(agent)
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        delivered = await run_agent(runner, session.id, "How warm is it?", streaming)
        stored = await stored_events(runner, session.id)

    final = [e for e in delivered if not e.partial]
    assert len(final) == 3, final
    call_event, response_event, answer = final

    # the model called the tool with schema-valid arguments, parsed into the tool's types
    [call] = call_event.get_function_calls()
    assert call.name == "get_temperature"
    assert call.id
    assert set(call.args) == {"unit"}
    assert ran == [Unit(call.args["unit"])]
    assert call_event.finish_reason == "STOP"

    # the tool's result went back to the model ...
    [response] = response_event.get_function_responses()
    assert (response.name, response.id) == ("get_temperature", call.id)
    assert response.response == temperature(ran[0])
    first, second = transport.bodies
    assert first["tool_choice"] == FORCED
    assert first["tools"][0]["function"]["parameters"]["properties"]["unit"]["enum"] == [
        "celsius",
        "fahrenheit",
    ]
    assert (
        bool(first.get("stream")) is bool(second.get("stream")) is (streaming is StreamingMode.SSE)
    )
    assert second["tool_choice"] == "none"
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == call.id
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == call.args
    assert tool == {
        "role": "tool",
        "tool_call_id": call.id,
        "content": json.dumps(response.response),
    }

    # ... and it answered in (gibberish) text, streamed when asked for, which ends the turn
    partial_text = "".join(e.text or "" for e in delivered if e.partial)
    assert partial_text == ((answer.text or "") if streaming is StreamingMode.SSE else "")
    assert answer.author == "weather"
    assert not answer.get_function_calls()
    assert answer.is_final_response()
    assert answer.text is not None or answer.error_code is not None

    # the session holds the user message and the final events, never the partial ones
    assert [e.author for e in stored] == ["user", "weather", "weather", "weather"]
    assert [e.id for e in stored[1:]] == [e.id for e in final]
    assert not any(e.partial for e in stored)


# -- text streaming and cancellation ---------------------------------------------------------------


def chatty_agent(model: OpenAIModel, max_tokens: int) -> LlmAgent:
    """An agent that writes exactly ``max_tokens`` tokens of gibberish (the end-of-turn token
    is banned)."""
    return LlmAgent(
        name="chatty",
        model=model,
        instruction="Say something.",
        generate_content_config={
            "max_output_tokens": max_tokens,
            "seed": SEED,
            "logit_bias": {str(END_OF_TURN): -100},
        },
    )


async def test_text_streaming_gives_partial_events_then_the_final_one(llama_url: str) -> None:
    async with make_model(llama_url) as model:
        runner = InMemoryRunner(chatty_agent(model, max_tokens=16))
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        delivered = await run_agent(runner, session.id, "Hello", StreamingMode.SSE)
        stored = await stored_events(runner, session.id)

    *partials, final = delivered
    assert len(partials) > 1
    assert all(e.partial and e.author == "chatty" for e in partials)
    assert not final.partial
    assert final.is_final_response()
    assert final.finish_reason == "MAX_TOKENS"
    assert final.text
    assert "".join(e.text or "" for e in partials) == final.text
    assert [(e.author, e.id) for e in stored] == [("user", stored[0].id), ("chatty", final.id)]


async def test_cancelling_mid_stream_leaves_the_model_usable(llama_url: str) -> None:
    seen: list[Event] = []
    async with make_model(llama_url) as model:
        runner = InMemoryRunner(chatty_agent(model, max_tokens=3000))
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        with trio.fail_after(TEST_TIMEOUT):
            async with runner.run(
                user_id="u",
                session_id=session.id,
                new_message="Tell me a long story.",
                run_config=RunConfig(streaming_mode=StreamingMode.SSE),
            ) as events:
                seen.append(await events.receive())  # the stream has begun
                with trio.move_on_after(0.3) as scope:
                    async for event in events:
                        seen.append(event)
        assert scope.cancelled_caught, "the stream ended before it could be cancelled"
        assert len(seen) > 1
        assert all(e.partial for e in seen)

        stored = await stored_events(runner, session.id)
        assert not any(e.partial for e in stored)

        # the same model (the same HTTP client) serves the next requests, streamed and not
        runner = InMemoryRunner(chatty_agent(model, max_tokens=8))
        session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
        again = await run_agent(runner, session.id, "Hello again", StreamingMode.SSE)
        request = LlmRequest(
            contents=[Content.from_text("Hi")], generation_config={"max_output_tokens": 8}
        )
        with trio.fail_after(TEST_TIMEOUT):
            direct = await model.generate(request)

    assert again[-1].is_final_response()
    assert again[-1].finish_reason == "MAX_TOKENS"
    assert again[-1].text
    assert direct.content is not None
    assert direct.finish_reason in {"STOP", "MAX_TOKENS"}
