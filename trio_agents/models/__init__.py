"""Models: the interface every language model implements, and the name registry.

The HTTP clients (and httpx with them) are imported on first use, so agents that bring their own
:class:`Model` do not pay for them at import time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._exports import publish as _publish, publish_one as _publish_one
from ._base import (
    FunctionDeclaration as FunctionDeclaration,
    LlmRequest as LlmRequest,
    LlmResponse as LlmResponse,
    Model as Model,
    register_model as register_model,
    resolve_model as resolve_model,
)

if TYPE_CHECKING:
    from ._anthropic import AnthropicModel as AnthropicModel
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

_publish(__name__, globals(), __all__)

_LAZY = {
    "AnthropicModel": "._anthropic",
    "GeminiModel": "._gemini",
    "HttpModel": "._http",
    "OpenAIModel": "._openai",
    "RetryPolicy": "._http",
    "ServerSentEvent": "._http",
    "parse_sse_lines": "._http",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    _publish_one(__name__, value)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _from_name(class_name: str) -> Any:
    """A registry factory that imports its client class when a name first resolves to it."""

    def factory(name: str) -> Model:
        model: Model = __getattr__(class_name).from_name(name)
        return model

    return factory


register_model(r"anthropic/.+", _from_name("AnthropicModel"))
register_model(r"claude-.+", _from_name("AnthropicModel"))
register_model(r"openai/.+", _from_name("OpenAIModel"))
register_model(r"(models/)?gemini-.+", _from_name("GeminiModel"))
