#!/usr/bin/env bash
# Build the opt-in local LLM server for tests/integration (issue 5 item 7).
#
# Creates a separate virtualenv at .venv-llama holding llama-cpp-python[server] (an OpenAI-compatible
# server; built from its sdist, ~9 minutes on 2 cores) and gguf (to write the random-weight test
# model). It pulls FastAPI, uvicorn and pydantic, which is why it never goes into .venv.
# Idempotent: does nothing when the pinned versions are already installed.
#
# Usage: bash scripts/llama_server/setup.sh        (then: TRIO_AGENTS_LLAMA=1 .venv/bin/python -m pytest tests/integration)
set -euo pipefail
cd "$(dirname "$0")/../.."

LLAMA_CPP_VERSION=0.3.36
GGUF_VERSION=0.19.0
VENV=.venv-llama
PYTHON="${PYTHON:-python3}"

installed() {
    [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$LLAMA_CPP_VERSION" "$GGUF_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version

import gguf  # noqa: F401
import llama_cpp.server  # noqa: F401  (the [server] extra is importable too)

sys.exit(0 if (version("llama_cpp_python"), version("gguf")) == tuple(sys.argv[1:]) else 1)
PY
}

if installed; then
    echo "== $VENV: llama-cpp-python $LLAMA_CPP_VERSION and gguf $GGUF_VERSION already installed"
    exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV with $("$PYTHON" --version)"
    "$PYTHON" -m venv "$VENV"
fi
echo "== installing llama-cpp-python[server]==$LLAMA_CPP_VERSION (builds from source, ~9 min on 2 cores) and gguf==$GGUF_VERSION"
start=$SECONDS
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip </dev/null
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "llama-cpp-python[server]==$LLAMA_CPP_VERSION" "gguf==$GGUF_VERSION" </dev/null
installed || { echo "error: $VENV is incomplete after installing" >&2; exit 1; }
echo "== $VENV ready in $((SECONDS - start)) s"
