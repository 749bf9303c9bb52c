"""Entry point of ``python -m trio_agents`` and the ``trio-agents`` script.

It imports nothing of the ``cli`` extra up front, so ``demo`` runs on the core install.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import TextIO

import trio

from ._demo import DEMOS, run_demo

__all__ = ["main"]


def _without_click(argv: list[str], out: TextIO) -> int:
    """The demo runs on the core install; everything else needs the ``cli`` extra."""
    if argv[:1] == ["demo"] and all(name in DEMOS for name in argv[1:]):
        trio.run(run_demo, argv[1:] or list(DEMOS), out)  # in memory: no options without click
        return 0
    print(
        "error: this command needs the 'cli' extra: pip install 'trio_agents[cli]'", file=sys.stderr
    )
    return 2


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 failed, 2 usage, 130 interrupted).

    Any failure prints one line on standard error (``--debug`` adds the traceback).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    try:
        import click

        from .cli._commands import CliState, cli
        from .cli._errors import one_line
    except ImportError:
        return _without_click(args, out)
    state = CliState(out)
    try:
        cli.main(args=args, prog_name="trio-agents", standalone_mode=False, obj=state)
    except click.UsageError as exc:
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        print(file=sys.stderr)
        return 130
    except Exception as exc:  # the command line's edge: one line, the traceback on request
        if state.debug:
            traceback.print_exception(exc)
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 1
    return 0
