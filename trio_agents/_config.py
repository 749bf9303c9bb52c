"""Run settings, :class:`RunConfig` and :class:`StreamingMode`: what agents and the Runner share."""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Mapping
from typing import Any

import attrs

from ._errors import ConfigurationError
from ._util import check_timeout
from .sessions._base import GetSessionConfig

__all__ = ["DEFAULT_RUN_CONFIG", "RunConfig", "StreamingMode"]

logger = logging.getLogger("trio_agents")


class StreamingMode(enum.Enum):
    """How model output reaches the consumer."""

    NONE = "none"
    """One event per model response."""
    SSE = "sse"
    """Partial chunks as they arrive, then the final aggregate (only the aggregate is stored)."""


def _check_max_llm_calls(instance: object, attribute: object, value: int) -> None:
    if value >= sys.maxsize:
        raise ConfigurationError(f"max_llm_calls must be less than sys.maxsize, got {value}")
    if value <= 0:
        logger.warning("max_llm_calls=%d: the number of model calls is not limited", value)


def _check_idle_timeout(instance: object, attribute: object, value: float | None) -> None:
    check_timeout(value, "RunConfig.model_idle_timeout")


@attrs.frozen(kw_only=True)
class RunConfig:
    """Per-run settings."""

    streaming_mode: StreamingMode = StreamingMode.NONE
    max_llm_calls: int = attrs.field(default=500, validator=_check_max_llm_calls)
    """Model calls allowed per invocation; ``<= 0`` means unlimited (R-RUN-10)."""
    custom_metadata: Mapping[str, Any] | None = None
    """Merged into every event's ``custom_metadata`` (the event's own keys win)."""
    get_session_config: GetSessionConfig | None = None
    """Which history the invocation loads (R-ST-8)."""
    model_idle_timeout: float | None = attrs.field(default=None, validator=_check_idle_timeout)
    """Seconds a model may go without sending anything (a whole answer without streaming, the
    next chunk with it) before :class:`~trio_agents.ModelTimeoutError`; None waits forever."""


DEFAULT_RUN_CONFIG = RunConfig()  # frozen: one shared instance serves every run without one
