"""PNG charts: how the per-unit cost of each workload scales with N, D, K, M, T, history and S.

``python -m benchmarks._charts RESULTS.json OUT_DIR`` (needs matplotlib, part of the ``bench``
extra); prints the files it wrote, one per line. Standard library and matplotlib only, so the
interpreter that has google-adk (and matplotlib) can draw them too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SIZE = {"W1": "n", "W2": "d", "W3": "k", "W4": "m", "W5": "t", "W6": "n", "W7": "s", "W8": "k"}
TITLE = {
    "W1": "W1 event round trip: per event vs N events",
    "W2": "W2 sequential depth: per event vs D children (1000 events)",
    "W3": "W3 parallel fan-out: per event vs K branches",
    "W4": "W4 loop: per iteration vs M iterations",
    "W5": "W5 LLM tool loop: per step vs T tool calls",
    "W6 memory": "W6 in-memory history: per append vs history length",
    "W6 sqlite": "W6 SQLite history: per append vs history length",
    "W7": "W7 many sessions: per event vs S concurrent invocations",
    "W8": "W8 cancellation: latency vs K branches",
}


def _groups(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if not r["primary"] or SIZE.get(r["workload"]) not in r["params"]:
            continue
        name = r["workload"]
        if name == "W6":
            name = f"W6 {r['params']['backend']}"
        groups.setdefault(name, []).append(r)
    return groups


def draw(results: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """One chart per workload with two or more sizes; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, group in sorted(_groups(results).items()):
        size = SIZE[name.split()[0]]
        if len({r["params"][size] for r in group}) < 2:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for impl in sorted({r["impl"] for r in group}):
            rows = sorted((r for r in group if r["impl"] == impl), key=lambda r: r["params"][size])
            xs = [r["params"][size] for r in rows]
            ms = [r["metrics"][r["primary"]] for r in rows]
            ys = [m["median"] for m in ms]
            err = [[y - m["min"] for y, m in zip(ys, ms, strict=True)],
                   [m["max"] - y for y, m in zip(ys, ms, strict=True)]]  # fmt: skip
            style = "-o" if impl in ("trio_agents", "google-adk") else "--."
            ax.errorbar(xs, ys, yerr=err, fmt=style, capsize=3, label=impl)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(size.upper() if name.startswith("W6") is False else "history length")
        ax.set_ylabel(group[0]["primary"].replace("_", " "))
        ax.set_title(TITLE[name], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / f"{name.replace(' ', '-')}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    results = json.loads(Path(argv[0]).read_text(encoding="utf-8"))["results"]
    for path in draw(results, Path(argv[1])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
