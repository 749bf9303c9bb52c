"""The entry point of one implementation's process: run its plan, write the results as JSON.

``python -m benchmarks._worker IMPL --out FILE [--quick] [--only W1,W3]`` where ``IMPL`` is
``floor``, ``trio_agents`` or ``google-adk``. Standard library only up to the import of the
implementation's module, so the google-adk worker runs in an interpreter without trio.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from importlib import metadata
from typing import Any

MODULES = {
    "floor": "benchmarks._floors",
    "trio_agents": "benchmarks._trio_agents",
    "google-adk": "benchmarks._adk",
}
VERSIONS = {
    "floor": ("trio",),
    "trio_agents": ("trio_agents", "trio", "attrs"),
    "google-adk": ("google-adk", "google-genai", "pydantic"),
}


def versions(impl: str) -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in VERSIONS[impl]:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._worker")
    parser.add_argument("impl", choices=sorted(MODULES))
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    module: Any = importlib.import_module(MODULES[args.impl])
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    for workload, run in module.plan(args.quick):
        if only and workload not in only:
            continue
        began = time.perf_counter()
        results += run()
        took = time.perf_counter() - began
        print(f"  {args.impl}: {workload} ({took:.1f} s)", file=sys.stderr, flush=True)
    meta = {"impl": args.impl, "versions": versions(args.impl)}
    meta["seconds"] = round(time.perf_counter() - started, 1)
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump({"meta": meta, "results": results}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
