"""The exception hierarchy of trio_agents: one tree, documented here.

Every error raised on purpose by the library derives from :class:`TrioAgentsError`. Where a
caller would naturally catch a builtin, the builtin is mixed in, so ``except ValueError`` keeps
working::

    TrioAgentsError(Exception)
    ├── ConfigurationError(TrioAgentsError, ValueError)   bad agent tree, names, bad input
    │   └── ResumeError                                     an invocation that cannot resume
    ├── SessionError
    │   ├── SessionNotFoundError(SessionError, LookupError, ValueError)
    │   ├── SessionExistsError                              create with an id already taken
    │   ├── StaleSessionError(SessionError, ValueError)     append through an outdated snapshot
    │   ├── SessionBusyError                                a run is already in flight
    │   ├── LeaseLostError                                  a run lost its lease to another
    │   └── StoreUnavailableError                           the store refused a connection
    ├── ArtifactNotFoundError(TrioAgentsError, LookupError) no such artifact version
    ├── ModelError                                          talking to a model failed
    │   ├── ModelHTTPError                                  the provider answered an HTTP error
    │   │   └── ModelRateLimitError                         HTTP 429 after the retries ran out
    │   ├── ModelTransportError                             connection failed or timed out
    │   ├── ModelResponseError                              an answer that cannot be understood
    │   ├── ModelTimeoutError                               a stream stalled past its idle limit
    │   └── testing.ReplayMissError                         no recorded answer for a request
    ├── ToolError                                           a tool's result is not JSON
    ├── ToolsetError                                        a toolset could not list its tools
    │   └── McpServerError                                  an MCP server failed, died or lied
    ├── PluginError(TrioAgentsError, RuntimeError)          a plugin hook raised (cause chained)
    ├── TemplateKeyError(TrioAgentsError, KeyError)         an instruction names a missing key
    ├── AgentTransferError(TrioAgentsError, ValueError)     transfer to an unknown/forbidden agent
    ├── LlmCallLimitError                                   max_llm_calls would be exceeded
    ├── AgentTimeoutError(TrioAgentsError, TimeoutError)    an agent ran past its ``timeout``
    ├── SerializationError(TrioAgentsError, ValueError)     not JSON, or not the expected shape
    └── testing.InjectedError                               a failure a scripted agent injects

Errors carry the name of the failing thing as attributes and in ``str()``
(``SerializationError.path``, ``PluginError.plugin``, ``ToolError.tool_name``, ...).

What stays a builtin: exceptions a tool, callback or model raises propagate with their own type
(the hooks see them first); Python's own protocols keep their errors (``TypeError`` when writing
to an immutable event mapping or deleting a state key, an unexpected keyword argument); a SQLite
service used after ``aclose()`` raises :class:`trio.ClosedResourceError`; cancellation is
:class:`trio.Cancelled`, never wrapped.
"""

from __future__ import annotations

__all__ = [
    "AgentTimeoutError",
    "AgentTransferError",
    "ArtifactNotFoundError",
    "ConfigurationError",
    "LeaseLostError",
    "LlmCallLimitError",
    "ModelError",
    "ModelHTTPError",
    "ModelRateLimitError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ModelTransportError",
    "PluginError",
    "ResumeError",
    "SerializationError",
    "SessionBusyError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "StaleSessionError",
    "TemplateKeyError",
    "ToolError",
    "ToolsetError",
    "McpServerError",
    "TrioAgentsError",
]


class TrioAgentsError(Exception):
    """Base class of every error trio_agents raises on purpose."""


class ConfigurationError(TrioAgentsError, ValueError):
    """Invalid configuration or input: a bad agent name, a second parent, a bad message."""


class ResumeError(ConfigurationError):
    """A resume request that cannot be honoured: an invocation that is not in the session or has
    finished, an app that is not resumable, or an answer to no open call. ``invocation_id`` and
    ``call_id`` (None when not about one call) name it. Raised before anything is stored."""

    def __init__(self, message: str, *, invocation_id: str, call_id: str | None = None) -> None:
        super().__init__(message)
        self.invocation_id = invocation_id
        self.call_id = call_id


class SessionError(TrioAgentsError):
    """Base class of session-store errors. ``session_id`` names the session."""

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionNotFoundError(SessionError, LookupError, ValueError):
    """No session with that id exists (for that app and user)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id}", session_id=session_id)


class SessionExistsError(SessionError):
    """``create_session`` was given an id that is already taken."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session already exists: {session_id}", session_id=session_id)


class StaleSessionError(SessionError, ValueError):
    """``append_event`` was called with a snapshot older than the stored session, or with one of
    a session that was deleted and created again under the same id since (``recreated``)."""

    def __init__(
        self, session_id: str, *, expected: int, actual: int, recreated: bool = False
    ) -> None:
        if recreated:
            reason = (
                f"the session was deleted and created again since the snapshot was taken "
                f"(now at revision {actual})"
            )
        else:
            reason = f"the snapshot has revision {expected}, the store has revision {actual}"
        super().__init__(
            f"Session {session_id} is stale: {reason}; reload it with get_session()",
            session_id=session_id,
        )
        self.expected = expected
        self.actual = actual
        self.recreated = recreated


class SessionBusyError(SessionError):
    """A run is already in flight on this session (``concurrent_runs="reject"``)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session {session_id} already has a run in flight", session_id=session_id)


class LeaseLostError(SessionError):
    """A run in flight lost its session's lease: the store's connection holding it broke and
    the lease could not be taken again (another holder took it meanwhile, or the store could
    not be reached). The run was cancelled; ``reason`` says which."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(
            f"Session {session_id}: the run lost its lease ({reason}); it was cancelled",
            session_id=session_id,
        )
        self.reason = reason


class StoreUnavailableError(SessionError):
    """The session store cannot take another run now (its connections are all in use), or
    could not commit an append (the message says whether the event may have been stored).

    Worth retrying shortly; the HTTP server answers it with 503 and ``Retry-After``.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message, session_id=session_id)


class ArtifactNotFoundError(TrioAgentsError, LookupError):
    """An explicitly requested artifact version does not exist."""

    def __init__(self, *, filename: str, version: int | None = None) -> None:
        which = "" if version is None else f" version {version}"
        super().__init__(f"artifact {filename!r}{which} not found")
        self.filename = filename
        self.version = version

    def __str__(self) -> str:
        return str(self.args[0])


class ModelError(TrioAgentsError):
    """Talking to a model failed."""


class _ProviderError(ModelError):
    """A failure of one provider's model; ``provider`` and ``model`` name it in the message."""

    def __init__(self, message: str, *, provider: str, model: str) -> None:
        super().__init__(f"{provider} model {model!r}: {message}")
        self.provider = provider
        self.model = model


class ModelHTTPError(_ProviderError):
    """The provider answered with an HTTP error. ``status`` and ``body`` (an excerpt) say which."""

    def __init__(self, message: str, *, provider: str, model: str, status: int, body: str) -> None:
        super().__init__(f"{message} (HTTP {status}): {body}", provider=provider, model=model)
        self.status = status
        self.body = body


class ModelRateLimitError(ModelHTTPError):
    """HTTP 429 after the retries ran out; ``retry_after`` is the server's hint in seconds."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status: int,
        body: str,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, model=model, status=status, body=body)
        self.retry_after = retry_after


class ModelTransportError(_ProviderError):
    """The connection failed or timed out (after the retries ran out); the cause is chained."""


class ModelResponseError(_ProviderError):
    """The provider's answer could not be understood (malformed JSON, missing fields)."""


class ModelTimeoutError(_ProviderError):
    """No response chunk came within ``RunConfig.model_idle_timeout``; ``seconds`` is the limit."""

    def __init__(self, *, provider: str, model: str, seconds: float) -> None:
        super().__init__(
            f"no response for {seconds:g} s (RunConfig.model_idle_timeout)",
            provider=provider,
            model=model,
        )
        self.seconds = seconds


class ToolError(TrioAgentsError):
    """A tool's result cannot be given to the model (it is not JSON); the cause is chained.

    ``tool_name`` and ``call_id`` name the call. An exception *raised* by a tool is not wrapped:
    it propagates with its own type (after the on-tool-error hooks declined to recover).
    """

    def __init__(self, message: str, *, tool_name: str, call_id: str | None = None) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.call_id = call_id


class ToolsetError(TrioAgentsError):
    """A toolset failed to give or run its tools. ``toolset`` names it; the cause is chained."""

    def __init__(self, message: str, *, toolset: str) -> None:
        super().__init__(message)
        self.toolset = toolset


class McpServerError(ToolsetError):
    """An MCP server could not start, died, timed out or sent what is not MCP.

    ``server`` is its command line or URL; ``stderr_tail`` the end of what a stdio server wrote
    to its standard error (empty for HTTP servers).
    """

    def __init__(self, message: str, *, server: str, stderr_tail: str = "") -> None:
        if stderr_tail:
            message = f"{message}; its stderr ends with:\n{stderr_tail}"
        super().__init__(message, toolset=server)
        self.server = server
        self.stderr_tail = stderr_tail


class PluginError(TrioAgentsError, RuntimeError):
    """A plugin hook raised. ``plugin`` and ``hook`` name it; the cause is chained."""

    def __init__(self, *, plugin: str, hook: str) -> None:
        super().__init__(f"plugin {plugin!r} failed in {hook}")
        self.plugin = plugin
        self.hook = hook


class TemplateKeyError(TrioAgentsError, KeyError):
    """An instruction template names a state key (or artifact) that does not exist."""

    def __init__(self, *, key: str, agent: str) -> None:
        filename = key.removeprefix("artifact.")
        what = (
            f"Context variable not found: `{key}`"
            if filename == key
            else f"Artifact {filename!r} not found"
        )
        super().__init__(f"{what} in agent {agent!r}.")
        self.key = key
        self.agent = agent

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0])


class AgentTransferError(TrioAgentsError, ValueError):
    """Transfer to an unknown, self or forbidden agent (a ``ValueError``, as ADK raises)."""

    def __init__(self, message: str, *, source: str, target: str) -> None:
        super().__init__(message)
        self.source = source
        self.target = target


class LlmCallLimitError(TrioAgentsError):
    """The invocation would exceed ``RunConfig.max_llm_calls``."""


class AgentTimeoutError(TrioAgentsError, TimeoutError):
    """An agent ran past its ``timeout``. ``agent`` and ``seconds`` name it and the limit."""

    def __init__(self, *, agent: str, seconds: float) -> None:
        super().__init__(f"agent {agent!r} timed out after {seconds:g} s")
        self.agent = agent
        self.seconds = seconds


class SerializationError(TrioAgentsError, ValueError):
    """A value cannot be turned into JSON (or parsed from it). ``path`` names where."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path
