#!/usr/bin/env bash
# Serve the packaged SmolLM2-135M-Instruct as an OpenAI-compatible API on loopback, to try (or test)
# SiliconFriend's `openai` backbone offline. Needs llama.cpp's server extra:
#   .venv/bin/pip install sse-starlette 'starlette-context>=0.3.6,<0.4'
# Then, in another terminal:
#   .venv/bin/silicon-friend web --llm openai:smollm2@http://127.0.0.1:8080/v1 --context-tokens 2048
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-8080}"
PY="${PYTHON:-.venv/bin/python}"
MODEL="$("$PY" -c 'from memory_bank.llm import default_gguf_path; print(default_gguf_path())')"
exec "$PY" -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT" --n_ctx 2048
