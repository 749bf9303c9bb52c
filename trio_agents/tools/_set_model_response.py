"""``set_model_response``: how an agent with both tools and an ``output_schema`` answers.

A model may not be able to call tools and follow a response schema in one request, so (as ADK
2.13 does) such an agent offers this extra tool, whose parameters are the output schema, and
is told to give its final answer by calling it. A valid call ends the agent's turn with a model
event holding the answer as JSON text (see the LLM flow); an invalid one is answered with the
validation error, for the model to try again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import SerializationError
from ..models._base import FunctionDeclaration
from ._base import BaseTool, ToolContext
from ._schema import json_schema

__all__ = ["SET_MODEL_RESPONSE", "SET_MODEL_RESPONSE_INSTRUCTION", "SetModelResponseTool"]

SET_MODEL_RESPONSE = "set_model_response"

SET_MODEL_RESPONSE_INSTRUCTION = (
    f"Give your final answer by calling `{SET_MODEL_RESPONSE}` with it in the required "
    "structure, once you are done with the other tools; do not answer with plain text."
)


class SetModelResponseTool(BaseTool):
    """The final answer of an agent, given as a call whose arguments follow ``schema``."""

    def __init__(self, schema: type | Mapping[str, Any], *, agent: str) -> None:
        super().__init__(
            name=SET_MODEL_RESPONSE,
            description="Give your final answer, in the structure of the output schema.",
        )
        self.schema = schema
        self.where = f"agent {agent!r} output_schema"

    def declaration(self) -> FunctionDeclaration:
        schema = self.schema
        parameters = json_schema(schema, where=self.where) if isinstance(schema, type) else schema
        return FunctionDeclaration(
            name=self.name, description=self.description, parameters=dict(parameters)
        )

    def answer(self, args: Mapping[str, Any]) -> Any:
        """``args`` validated against the schema, as plain JSON data.

        Raises:
            SerializationError: they do not fit.
        """
        from ..agents._output import validate_output

        return validate_output(self.schema, dict(args), where=self.where)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        try:
            return self.answer(args)
        except SerializationError as exc:
            return {
                "error": f"The answer does not fit the required structure: {exc}. Call "
                f"`{SET_MODEL_RESPONSE}` again with every required field, of the right type."
            }
