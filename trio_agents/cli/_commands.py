"""The click commands (extra ``cli``: click and rich)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

import attrs
import click
import trio
from rich.console import Console

from .._app import App
from .._demo import DEFAULT_DEMO_DB, DEMOS, format_event, run_demo
from .._runner import Runner
from .._version import __version__
from ..agents import BaseAgent
from ._chat import chat
from ._load import load_apps
from ._services import open_services, runner_for

__all__ = ["cli"]


@attrs.define
class CliState:
    """What the commands share with the entry point: where output goes, and ``--debug``."""

    out: TextIO
    debug: bool = False


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and isinstance(ctx.obj, CliState):
        ctx.obj.debug = True


debug_option = click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    callback=_set_debug,
    help="on failure, print the full traceback too",
)

_service_options = [
    click.option(
        "--session-service",
        default="memory://",
        show_default=True,
        help="memory://, sqlite:///path or postgresql://...",
    ),
    click.option(
        "--artifact-service",
        default="memory://",
        show_default=True,
        help="memory:// or file:///dir",
    ),
    click.option("--memory-service", default=None, help="memory:// or sqlite:///path"),
]


_server_options = [
    click.option("--host", default="127.0.0.1", show_default=True, help="the address to bind"),
    click.option(
        "--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="0: any"
    ),
    click.option(
        "--auth-token",
        envvar="TRIO_AGENTS_AUTH_TOKEN",
        default=None,
        help="require 'Authorization: Bearer <token>' (env TRIO_AGENTS_AUTH_TOKEN)",
    ),
    click.option(
        "--cors-origin",
        "--allow-origins",
        "cors_origins",
        multiple=True,
        help="an origin allowed by CORS, '*' for any (repeatable)",
    ),
    click.option(
        "--graceful-timeout",
        default=5.0,
        show_default=True,
        type=click.FloatRange(0),
        help="seconds requests get to finish on Ctrl-C",
    ),
    click.option(
        "--backlog",
        default=2048,
        show_default=True,
        type=click.IntRange(1),
        help="connections queued before the server accepts them (more are reset)",
    ),
    click.option(
        "--keep-alive-timeout",
        default=5.0,
        show_default=True,
        type=click.FloatRange(0, min_open=True),
        help="seconds an idle connection, or one still sending its request head, is kept",
    ),
    click.option(
        "--send-timeout",
        default=30.0,
        show_default=True,
        type=click.FloatRange(0, min_open=True),
        help="seconds a client may accept none of an answer (it stopped reading) before its "
        "connection is closed",
    ),
    click.option(
        "--max-header-bytes",
        default=16384,
        show_default=True,
        type=click.IntRange(1024),
        help="largest request line plus headers (larger: 431, connection closed)",
    ),
    click.option(
        "--body-read-timeout",
        default=30.0,
        show_default=True,
        type=click.FloatRange(0, min_open=True),
        help="seconds a request body may take to arrive (slower: 408, connection closed)",
    ),
    click.option(
        "--max-detached-runs",
        default=64,
        show_default=True,
        type=click.IntRange(0),
        help="detached runs in flight at once (more: 503 with Retry-After)",
    ),
]


def service_options(command: Any) -> Any:
    for option in reversed(_service_options):
        command = option(command)
    return command


def server_options(command: Any) -> Any:
    for option in reversed([*_server_options, *_service_options]):
        command = option(command)
    return command


def _out(ctx: click.Context) -> TextIO:
    return ctx.obj.out if isinstance(ctx.obj, CliState) else sys.stdout


@click.group(help="Run ADK-style agent applications on Trio.")
@click.version_option(__version__, prog_name="trio-agents", message="%(prog)s %(version)s")
@debug_option
def cli() -> None:
    pass


@cli.command(help="Run the built-in demo applications (all of them by default).")
@debug_option
@click.argument("names", nargs=-1, type=click.Choice(list(DEMOS)))
@click.option(
    "--db",
    default=DEFAULT_DEMO_DB,
    show_default=True,
    help="the SQLite file the demo sessions live in; running again continues them",
)
@click.option("--in-memory", is_flag=True, help="keep nothing: sessions live in memory only")
@click.pass_context
def demo(ctx: click.Context, /, names: tuple[str, ...], db: str, in_memory: bool) -> None:
    trio.run(run_demo, list(names) or list(DEMOS), _out(ctx), None if in_memory else db)


def _pick(apps: dict[str, BaseAgent | App], app: str | None) -> tuple[str, BaseAgent | App]:
    if app is None:
        if len(apps) != 1:
            raise click.UsageError(
                f"TARGET holds several apps; choose one with --app: {sorted(apps)}"
            )
        return next(iter(apps.items()))
    if app not in apps:
        raise click.UsageError(f"no app {app!r} in TARGET; it holds {sorted(apps)}")
    return app, apps[app]


@cli.command(help="Chat with an agent in the terminal, or run it on messages.")
@debug_option
@click.argument("target")
@click.option("-m", "--message", "messages", multiple=True, help="a user message (repeatable)")
@click.option("--replay", type=click.File(), help="a file of user messages, one per line")
@click.option("--app", default=None, help="which app, when TARGET is a directory of apps")
@click.option("--user-id", default="user", show_default=True)
@click.option("--session-id", default=None, help="continue this session (created if missing)")
@service_options
@click.pass_context
def run(
    ctx: click.Context,
    /,
    target: str,
    messages: tuple[str, ...],
    replay: TextIO | None,
    app: str | None,
    user_id: str,
    session_id: str | None,
    **uris: str | None,
) -> None:
    app_name, agent = _pick(load_apps(target), app)
    if replay is not None:
        messages += tuple(line.rstrip("\n") for line in replay if line.strip())
    interactive = not messages and replay is None and sys.stdin.isatty()
    if not messages and not interactive:
        messages = tuple(line.rstrip("\n") for line in sys.stdin if line.strip())
    trio.run(
        _run, app_name, agent, list(messages), interactive, user_id, session_id, uris, _out(ctx)
    )


async def _session(runner: Runner, user_id: str, session_id: str | None) -> tuple[str, int]:
    """The session to run on (created if missing) and how many events it already holds."""
    svc = runner.session_service
    if session_id is not None:
        found = await svc.get_session(
            app_name=runner.app_name, user_id=user_id, session_id=session_id
        )
        if found is not None:
            return found.id, len(found.events)
    created = await svc.create_session(
        app_name=runner.app_name, user_id=user_id, session_id=session_id
    )
    return created.id, 0


async def _run(
    app_name: str,
    agent: BaseAgent | App,
    messages: list[str],
    interactive: bool,
    user_id: str,
    session_id: str | None,
    uris: dict[str, str | None],
    out: TextIO,
) -> None:
    async with (
        open_services(
            sessions=uris["session_service"] or "memory://",
            artifacts=uris["artifact_service"] or "memory://",
            memory=uris["memory_service"],
        ) as services,
        runner_for(app_name, agent, services) as runner,
    ):
        sid, index = await _session(runner, user_id, session_id)  # numbers: places in history
        if interactive:
            await chat(runner, user_id=user_id, session_id=sid, console=Console(file=out))
            return
        for message in messages:
            print(f"> user: {message}", file=out)
            index += 1  # the message is stored too
            async with runner.run(user_id=user_id, session_id=sid, new_message=message) as events:
                async for event in events:
                    index += 0 if event.partial else 1
                    print(format_event(index, event), file=out)


@cli.command("api-server", help="Serve the apps of TARGET over ADK's HTTP API (Ctrl-C stops).")
@debug_option
@click.argument("target")
@server_options
@click.pass_context
def api_server(ctx: click.Context, /, target: str, **options: Any) -> None:
    _serve(target, options, ui=False, out=_out(ctx))


@cli.command("mcp-server", help="Serve the apps of TARGET as MCP tools (stdio, or --http).")
@click.argument("target")
@click.option("--http", is_flag=True, help="streamable HTTP at http://HOST:PORT/mcp, not stdio")
@click.option("--host", default="127.0.0.1", show_default=True, help="the address to bind")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="0: any"
)
@service_options
def mcp_server(target: str, http: bool, host: str, port: int, **uris: Any) -> None:
    from ._mcp import serve_mcp

    serve_mcp(target, http=http, host=host, port=port, uris=uris)


@cli.command(help="Serve the apps of TARGET: the HTTP API and the dev UI (Ctrl-C stops).")
@debug_option
@click.argument("target")
@server_options
@click.option(
    "--adk-ui",
    is_flag=True,
    help="serve google-adk's own dev UI instead of trio_agents' (needs google-adk installed)",
)
@click.pass_context
def web(ctx: click.Context, /, target: str, **options: Any) -> None:
    _serve(target, options, ui=True, out=_out(ctx))


def _serve(target: str, options: dict[str, Any], *, ui: bool, out: TextIO) -> None:
    try:
        from ._serve import ServeOptions, serve_apps
    except ImportError as exc:
        missing = (exc.name or "a dependency").partition(".")[0]
        raise click.ClickException(
            f"this command needs the 'server' extra ({missing} is not installed): "
            "pip install 'trio_agents[server]'"
        ) from exc
    apps = load_apps(target)
    trio.run(serve_apps, apps, ServeOptions(**options, ui=ui), out)
