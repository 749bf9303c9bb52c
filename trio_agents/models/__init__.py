"""Models: the interface every language model implements, and the name registry."""

from __future__ import annotations

from ._base import (
    FunctionDeclaration as FunctionDeclaration,
    LlmRequest as LlmRequest,
    LlmResponse as LlmResponse,
    Model as Model,
    register_model as register_model,
    resolve_model as resolve_model,
)

__all__ = [
    "FunctionDeclaration",
    "LlmRequest",
    "LlmResponse",
    "Model",
    "register_model",
    "resolve_model",
]
