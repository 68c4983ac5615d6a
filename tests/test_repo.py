"""The repository's own promises: README commands, CI, configs and registry agree."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from probe.benches import OPEN_ANSWER_KINDS, REGISTRY
from probe.config import build
from probe.models import ModelSpec

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README must open with a bash block"
    return [line.split("#")[0].strip() for line in block.group(1).strip().splitlines()]


def test_ci_runs_the_readme_test_command() -> None:
    run_cmd, test_cmd = _readme_commands()
    assert run_cmd.endswith("-m probe") and "pytest" in test_cmd
    ci_lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert test_cmd in ci_lines


def test_every_model_config_builds_and_pairs_are_mutual() -> None:
    specs = {p.stem: build(ModelSpec, yaml.safe_load(p.read_text()), p.name)
             for p in (ROOT / "conf/model").glob("*.yaml")}
    assert {"tiny", "smollm2-135m", "gemma-3-12b", "gemma-3-12b-pt", "llama-3.1-8b", "llama-3.1-8b-base",
            "qwen3-8b", "qwen3-8b-base", "olmo-2-7b", "olmo-2-7b-base"} <= set(specs)
    for stem, spec in specs.items():
        assert spec.name == stem, f"{stem}.yaml names itself {spec.name!r}"
        if spec.pair is not None:
            other = specs[spec.pair]
            assert other.pair == stem and {spec.kind, other.kind} == {"instruct", "base"}, stem
        if spec.source in ("hub", "auto"):
            assert spec.hub_id and "/" in spec.hub_id
    assert specs["qwen3-8b"].chat_template_kwargs == {"enable_thinking": False}
    assert "date_string" in specs["llama-3.1-8b"].chat_template_kwargs


def test_bench_configs_name_registered_kinds() -> None:
    for p in (ROOT / "conf/bench").glob("*.yaml"):
        cfg = yaml.safe_load(p.read_text())
        assert (cfg["kind"] in REGISTRY or cfg["kind"] in OPEN_ANSWER_KINDS) and cfg["name"] == p.stem, p.name


def test_import_probe_stays_light() -> None:
    import subprocess
    import sys

    code = "import sys, probe; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
