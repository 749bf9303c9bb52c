"""``python -m benchmarks``: W1-W8 on trio_agents, the Trio floors and google-adk, in one go.

Each implementation runs in its own process, back to back, so every ratio comes from one run on
one machine: the floors and trio_agents under this interpreter, google-adk under the interpreter
given with ``--adk-python`` (a separate virtualenv with ``google-adk==2.13.0``; without the
option, this interpreter is used if it can import google-adk, else google-adk is skipped). The
table (medians with min–max, ratios to the floor and to google-adk, the targets of
``docs/benchmarks/workloads.md``) is printed and written as JSON and Markdown to
``benchmarks/results/``, with PNG charts when matplotlib is importable. Timings are never
asserted; a failing correctness check aborts the run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._report import render
from benchmarks._targets import evaluate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
IMPLS = ("floor", "trio_agents", "google-adk")


def _worker(python: str, impl: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one implementation in its own process; its results and versions."""
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "results.json"
        command = [python, "-m", "benchmarks._worker", impl, "--out", str(out)]
        command += ["--quick"] if args.quick else []
        command += ["--only", args.only] if args.only else []
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the {impl} benchmarks failed (exit status {done.returncode})")
        data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def _adk_python(args: argparse.Namespace) -> str | None:
    if args.no_adk:
        return None
    if args.adk_python:
        return str(args.adk_python)
    if importlib.util.find_spec("google") and importlib.util.find_spec("google.adk"):
        return sys.executable
    return None


def _git(*command: str) -> str:
    try:
        done = subprocess.run(
            ["git", *command], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip()


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _meta(args: argparse.Namespace, versions: dict[str, Any], stamp: str) -> dict[str, Any]:
    dirty = " (uncommitted changes)" if _git("status", "--porcelain", "--", "trio_agents") else ""
    return {
        "date": stamp,
        "machine": f"{_cpu()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "trio_agents commit": _git("rev-parse", "--short", "HEAD") + dirty,
        "versions": versions,
        "mode": "smoke run (--quick: tiny sizes, nothing measured)" if args.quick else "full",
        "runs": args.runs,
        "command": "python -m benchmarks " + " ".join(sys.argv[1:]),
    }


def _charts(results_file: Path, out_dir: Path, adk_python: str | None) -> list[Path]:
    """Draw with this interpreter's matplotlib, else with the google-adk interpreter's."""
    if importlib.util.find_spec("matplotlib"):
        from benchmarks._charts import draw

        return draw(json.loads(results_file.read_text(encoding="utf-8"))["results"], out_dir)
    if adk_python is None:
        return []
    command = [adk_python, "-m", "benchmarks._charts", str(results_file), str(out_dir)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"(no charts: {done.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return []
    return [Path(line) for line in done.stdout.splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: seconds, not minutes")
    parser.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W3")
    parser.add_argument("--adk-python", type=Path, help="an interpreter that has google-adk")
    parser.add_argument("--no-adk", action="store_true", help="do not run google-adk")
    parser.add_argument("--runs", type=int, default=1, help="whole runs back to back (targets: 3)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results are written")
    parser.add_argument("--charts", type=Path, help="where PNG charts go (default: next to them)")
    parser.add_argument("--no-charts", action="store_true")
    args = parser.parse_args(argv)
    adk = _adk_python(args)
    plan = [("floor", sys.executable), ("trio_agents", sys.executable)]
    plan += [("google-adk", adk)] if adk else []
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    all_results: list[dict[str, Any]] = []
    verdicts, versions = [], {}
    for run in range(args.runs):
        results = []
        for impl, python in plan:
            print(f"== run {run + 1}/{args.runs}: {impl}", file=sys.stderr, flush=True)
            data = _worker(python, impl, args)
            versions[impl] = data["meta"]["versions"]
            results += data["results"]
        verdicts.append(evaluate(results))
        all_results += [{**r, "run": run + 1} for r in results]
    if not adk:
        versions["google-adk"] = "not run (pass --adk-python PATH to an interpreter that has it)"
    meta = _meta(args, versions, stamp)
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.out / f"trio_agents-{stamp}"
    json_file = base.with_suffix(".json")
    json_file.write_text(json.dumps({"meta": meta, "results": all_results}, indent=1))
    last = [r for r in all_results if r["run"] == args.runs]
    charts: list[Path] = []
    if not args.no_charts:
        charts = _charts(json_file, args.charts or args.out / f"charts-{stamp}", adk)
    links = [os.path.relpath(chart, args.out) for chart in charts]
    report = render(meta, last, verdicts, links, smoke=args.quick)
    md_file = base.with_suffix(".md")
    md_file.write_text(report, encoding="utf-8")
    shutil.copyfile(json_file, args.out / "latest.json")
    shutil.copyfile(md_file, args.out / "latest.md")
    print(report)
    print(f"written: {json_file}, {md_file}" + (f", {len(charts)} charts" if charts else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
