"""trio_agents: ADK-style agent applications on Trio.

Agents run as tasks in the invocation's nursery and hand their events to the Runner over memory
channels; an agent resumes only after its event is committed. See the README for a tour.
"""

from __future__ import annotations

from ._app import App as App, ResumabilityConfig as ResumabilityConfig
from ._content import (
    Blob as Blob,
    CodeExecutionResult as CodeExecutionResult,
    Content as Content,
    ExecutableCode as ExecutableCode,
    FileData as FileData,
    FunctionCall as FunctionCall,
    FunctionResponse as FunctionResponse,
    Part as Part,
)
from ._context import (
    CallbackContext as CallbackContext,
    EventActionsDraft as EventActionsDraft,
    InvocationContext as InvocationContext,
    ReadonlyContext as ReadonlyContext,
)
from ._errors import (
    AgentTimeoutError as AgentTimeoutError,
    AgentTransferError as AgentTransferError,
    ArtifactNotFoundError as ArtifactNotFoundError,
    ConfigurationError as ConfigurationError,
    LeaseLostError as LeaseLostError,
    LlmCallLimitError as LlmCallLimitError,
    McpServerError as McpServerError,
    ModelError as ModelError,
    ModelHTTPError as ModelHTTPError,
    ModelRateLimitError as ModelRateLimitError,
    ModelResponseError as ModelResponseError,
    ModelTimeoutError as ModelTimeoutError,
    ModelTransportError as ModelTransportError,
    PluginError as PluginError,
    ResumeError as ResumeError,
    SerializationError as SerializationError,
    SessionBusyError as SessionBusyError,
    SessionError as SessionError,
    SessionExistsError as SessionExistsError,
    SessionNotFoundError as SessionNotFoundError,
    StaleSessionError as StaleSessionError,
    StoreUnavailableError as StoreUnavailableError,
    TemplateKeyError as TemplateKeyError,
    ToolError as ToolError,
    ToolsetError as ToolsetError,
    TrioAgentsError as TrioAgentsError,
)
from ._events import Event as Event, EventActions as EventActions, UsageMetadata as UsageMetadata
from ._exports import publish as _publish
from ._runner import (
    InMemoryRunner as InMemoryRunner,
    RunConfig as RunConfig,
    Runner as Runner,
    RunStream as RunStream,
    StreamingMode as StreamingMode,
)
from ._state import State as State
from ._tool_confirmation import ToolConfirmation as ToolConfirmation
from ._version import __version__ as __version__
from .agents import (
    Agent as Agent,
    BaseAgent as BaseAgent,
    LlmAgent as LlmAgent,
    LoopAgent as LoopAgent,
    ParallelAgent as ParallelAgent,
    SequentialAgent as SequentialAgent,
)
from .sessions import Session as Session
from .tools import ToolContext as ToolContext

__all__ = [
    "Agent",
    "AgentTimeoutError",
    "AgentTransferError",
    "App",
    "ArtifactNotFoundError",
    "BaseAgent",
    "Blob",
    "CallbackContext",
    "CodeExecutionResult",
    "ConfigurationError",
    "Content",
    "Event",
    "EventActions",
    "EventActionsDraft",
    "ExecutableCode",
    "FileData",
    "FunctionCall",
    "FunctionResponse",
    "InMemoryRunner",
    "InvocationContext",
    "LeaseLostError",
    "LlmAgent",
    "LlmCallLimitError",
    "LoopAgent",
    "McpServerError",
    "ModelError",
    "ModelHTTPError",
    "ModelRateLimitError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ModelTransportError",
    "ParallelAgent",
    "Part",
    "PluginError",
    "ReadonlyContext",
    "ResumabilityConfig",
    "ResumeError",
    "RunConfig",
    "RunStream",
    "Runner",
    "SequentialAgent",
    "SerializationError",
    "Session",
    "SessionBusyError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "StaleSessionError",
    "State",
    "StoreUnavailableError",
    "StreamingMode",
    "TemplateKeyError",
    "ToolConfirmation",
    "ToolContext",
    "ToolError",
    "ToolsetError",
    "TrioAgentsError",
    "UsageMetadata",
]


_publish(__name__, globals(), __all__)
del _publish
