#!/usr/bin/env bash
# Build probe's wheel, install it (not editable) into a fresh venv, and run the demo bench on the
# tiny model from a directory outside the repository: the installed package must carry its
# configs and data, and `python -m probe` must work from anywhere.
#   bash scripts/check_wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
rm -rf dist .venv-wheel
.venv/bin/python -m pip wheel -q --no-deps -w dist .
python3 -m venv .venv-wheel
.venv-wheel/bin/python -m pip install -q --upgrade pip
# torch first and pinned, as in setup.sh: left to the resolver, a bare `torch` pulls a CUDA build.
.venv-wheel/bin/python -m pip install -q "torch==2.13.0"
.venv-wheel/bin/python -m pip install -q dist/culture_probe-*.whl
work=$(mktemp -d)
cd "$work"
# the `probe` console script (= python -m probe)
PROBE_CACHE="$work/cache" HF_HUB_OFFLINE=1 "$repo/.venv-wheel/bin/probe" model=tiny bench=demo \
  analysis.n_boot=100 progress=false hydra.run.dir="$work/run"
"$repo/.venv-wheel/bin/python" - "$work/run" "$repo" <<'PY'
import json, sys
from pathlib import Path

import probe

run, repo = Path(sys.argv[1]), Path(sys.argv[2]).resolve()
installed = Path(probe.__file__).resolve().parent
assert installed != repo / "probe" and "site-packages" in installed.parts, f"probe imported from {installed}"
for name in ("DONE", "metrics.json", "report.md", "report.html", "prompts.parquet", "scores.parquet"):
    assert (run / name).is_file(), name
m = json.loads((run / "metrics.json").read_text())
assert (m["bench"], m["model"], m["n_prompts"]) == ("demo", "tiny", 1248), m
print(f"check_wheel: ok — installed probe {probe.__version__} from {Path(probe.__file__).parent} ran the demo")
PY
rm -rf "$work"
