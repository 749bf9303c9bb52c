"""Agents: the base class and the workflow agents."""

from __future__ import annotations

from .._exports import publish as _publish
from ._base import BaseAgent as BaseAgent
from ._instructions import inject_session_state as inject_session_state
from ._llm import Agent as Agent, InstructionProvider as InstructionProvider, LlmAgent as LlmAgent
from ._loop import LoopAgent as LoopAgent
from ._parallel import ParallelAgent as ParallelAgent
from ._sequential import SequentialAgent as SequentialAgent

__all__ = [
    "Agent",
    "BaseAgent",
    "InstructionProvider",
    "LlmAgent",
    "LoopAgent",
    "ParallelAgent",
    "SequentialAgent",
    "inject_session_state",
]

_publish(__name__, globals(), __all__)
