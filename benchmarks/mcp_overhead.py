"""``python -m benchmarks.mcp_overhead``: what trio_agents adds to a warm MCP tool call.

Not one of W1-W8 (it needs the ``mcp`` extra and starts a server process). One stdio server
(``benchmarks/_mcp_server.py``), one warm session: calls alternate between the bare SDK call
(``ClientSession.call_tool``) and the same call through trio_agents (``McpTool.run_async``: the
toolset's scope lookup, the request deadline, the conversion to a function response), on the
same session, alternating call by call, so the transport and the machine's load cost the same on
both sides; the overhead is the median of the paired differences. Prints per-call medians and their
difference, writes ``benchmarks/results/mcp_overhead.json``. Timings are never asserted; a
wrong answer aborts the run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

from trio_agents.tools._scope import ToolsetScope, activated
from trio_agents.tools.mcp import McpToolset, StdioConnectionParams, StdioServerParameters

HERE = Path(__file__).resolve().parent
SERVER = HERE / "_mcp_server.py"
WARMUP = 20


async def measure(calls: int, rounds: int) -> dict[str, Any]:
    params = StdioConnectionParams(
        server_params=StdioServerParameters(command=sys.executable, args=[str(SERVER)]),
        timeout=30,
    )
    toolset = McpToolset(connection_params=params)
    scope = ToolsetScope()
    async with scope:
        with activated(scope):
            (tool,) = await toolset.get_tools()
            session = toolset._connections[scope].session
            assert session is not None
            bare: list[float] = []
            ours: list[float] = []
            for i in range(calls * rounds + WARMUP):  # alternate: both see the same load
                start = time.perf_counter()
                result = await session.call_tool("add", {"a": i, "b": 1})
                middle = time.perf_counter()
                response = await tool.run_async(args={"a": i, "b": 1}, tool_context=None)  # type: ignore[arg-type]
                end = time.perf_counter()
                _check(result.structured_content, i)
                _check(response.get("structuredContent"), i)
                if i >= WARMUP:
                    bare.append(middle - start)
                    ours.append(end - middle)
    overhead = [o - b for o, b in zip(ours, bare, strict=True)]
    return {
        "workload": "MCP warm tool call",
        "calls_per_round": calls,
        "rounds": rounds,
        "bare_sdk_ms": statistics.median(bare) * 1e3,
        "trio_agents_ms": statistics.median(ours) * 1e3,
        "overhead_ms": statistics.median(overhead) * 1e3,
        "overhead_quartiles_ms": [q * 1e3 for q in statistics.quantiles(overhead, n=4)],
        "target_ms": 1.0,
    }


def _check(structured: Any, i: int) -> None:
    if structured != {"result": i + 1}:
        raise SystemExit(f"wrong answer for add({i}, 1): {structured!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few calls: a smoke run")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "mcp_overhead.json")
    args = parser.parse_args()
    calls, rounds = (20, 2) if args.quick else (300, 7)
    data = trio.run(measure, calls, rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(
        f"warm MCP tool call: bare SDK {data['bare_sdk_ms']:.3f} ms, through trio_agents "
        f"{data['trio_agents_ms']:.3f} ms, overhead {data['overhead_ms']:.3f} ms "
        f"(quartiles {', '.join(f'{q:.3f}' for q in data['overhead_quartiles_ms'])}; "
        f"target <= {data['target_ms']} ms)"
    )


if __name__ == "__main__":
    main()
