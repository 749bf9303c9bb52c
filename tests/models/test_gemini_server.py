"""GeminiModel against the fake Gemini API beyond the provider contract
(``test_provider_contract.py``): function calls the API gives no id, and blocked prompts."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agents import StreamingMode

from .fake_provider import HTTPX_LEFTOVERS, FakeProvider, check_agent_run, run_agent, served
from .wires import GeminiWire

pytestmark = HTTPX_LEFTOVERS
STREAMING = pytest.mark.parametrize("streaming", [StreamingMode.NONE, StreamingMode.SSE])


@STREAMING
async def test_a_call_without_an_id_gets_a_client_id_that_is_never_sent(
    serve_app: Any, streaming: StreamingMode
) -> None:
    server = FakeProvider(GeminiWire(call_id=None))
    async with await served(serve_app, server) as model:
        delivered = await run_agent(model, streaming)
    (call,) = [c for e in delivered if not e.partial for c in e.get_function_calls()]
    assert call.id is not None and call.id.startswith("adk-")
    check_agent_run(server, delivered, streaming, call.id)  # the requests carry no id


@STREAMING
async def test_a_blocked_prompt_is_an_error_event(serve_app: Any, streaming: StreamingMode) -> None:
    server = FakeProvider(GeminiWire(), mode="blocked")
    async with await served(serve_app, server) as model:
        delivered = await run_agent(model, streaming)
    (event,) = delivered
    assert (event.error_code, event.content) == ("SAFETY", None)
    assert event.error_message == "the prompt was blocked: SAFETY"
