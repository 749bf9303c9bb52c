"""Models: the interface every language model implements, and the name registry."""

from __future__ import annotations

from ._anthropic import AnthropicModel as AnthropicModel
from ._base import (
    FunctionDeclaration as FunctionDeclaration,
    LlmRequest as LlmRequest,
    LlmResponse as LlmResponse,
    Model as Model,
    register_model as register_model,
    resolve_model as resolve_model,
)
from ._gemini import GeminiModel as GeminiModel
from ._http import (
    HttpModel as HttpModel,
    RetryPolicy as RetryPolicy,
    ServerSentEvent as ServerSentEvent,
    parse_sse_lines as parse_sse_lines,
)
from ._openai import OpenAIModel as OpenAIModel

__all__ = [
    "AnthropicModel",
    "FunctionDeclaration",
    "GeminiModel",
    "HttpModel",
    "LlmRequest",
    "LlmResponse",
    "Model",
    "OpenAIModel",
    "RetryPolicy",
    "ServerSentEvent",
    "parse_sse_lines",
    "register_model",
    "resolve_model",
]

register_model(r"anthropic/.+", AnthropicModel.from_name)
register_model(r"claude-.+", AnthropicModel.from_name)
register_model(r"openai/.+", OpenAIModel.from_name)
register_model(r"(models/)?gemini-.+", GeminiModel.from_name)
