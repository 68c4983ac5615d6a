"""Config values checked at the edge: every float finite, every int within 64 bits, seeds and
bootstrap sizes bounded, lists the code needs non-empty — refused with one line (key, expected,
got) when the composed config becomes a typed `RunConfig`, before anything loads or is written."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
from conftest import probe_env, run_probe
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from probe.config import NonEmpty, Seed, build, package_conf_dir
from probe.errors import ProbeInputError
from probe.pipeline.spec import run_config

REPO_ROOT = Path(__file__).resolve().parents[2]


def _config(*overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "bench=disco", *overrides])
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    return values


@pytest.mark.parametrize("override, message", [
    ("analysis.temperature=inf", "analysis.temperature: expected a finite number > 0, got inf"),
    ("analysis.temperature=nan", "analysis.temperature: expected a finite number > 0, got nan"),
    ("analysis.letter_prior_ratio=inf", "analysis.letter_prior_ratio: expected a finite number > 1, got inf"),
    ("analysis.seed=-5", "analysis.seed: -5 is out of range; expected a value ≥ 0"),
    ("analysis.seed=4294967296", "analysis.seed: 4294967296 is out of range; expected a value < 4294967296"),
    ("analysis.n_boot=1e20", "analysis.n_boot: expected an integer 0 or ≥ 10 and ≤ 1000000, got 1e+20"),
    ("analysis.n_boot=100000000000000000000",
     "analysis.n_boot: expected an integer 0 or ≥ 10 and ≤ 1000000, got 100000000000000000000"),
    ("analysis.n_boot=1000001", "analysis.n_boot: 1000001 is out of range; expected a value ≤ 1000000"),
    ("bench.conditions=[]", "bench.conditions: expected a non-empty list, got []"),
    ("bench.cultures=[]", "bench.cultures: expected a non-empty list, got []"),
    ("bench.high_resource=[]", "bench.high_resource: expected a non-empty list, got []"),
    ("backend.seed=-1", "backend.seed: -1 is out of range; expected a value ≥ 0"),
    ("backend.sample_temperature=inf", "backend.sample_temperature: expected a finite number > 0, got inf"),
    ("analysis.capture_layers=[100000000000000000000]",
     "analysis.capture_layers[0]: 100000000000000000000 does not fit in 64 bits"),
])
def test_out_of_bound_values_are_refused_when_the_config_is_typed(override: str, message: str, tmp_path: Path) -> None:
    values = _config(override)
    with pytest.raises(ProbeInputError) as e:
        run_config(values, tmp_path / "run")
    assert str(e.value).startswith(message) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("override, message", [
    ("judge.timeout_s=inf", "judge.timeout_s: expected a finite number > 0, got inf"),
    ("judge.requests_per_minute=nan", "judge.requests_per_minute: expected a finite number ≥ 0, got nan"),
])
def test_judge_options_are_finite(override: str, message: str, tmp_path: Path) -> None:
    values = _config("bench=locqa", "judge=http", override)
    with pytest.raises(ProbeInputError, match=message):
        run_config(values, tmp_path / "run")


def test_steering_alpha_must_be_finite(tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match="intervention.alpha: expected a finite number, got nan"):
        run_config(_config("intervention=steer", "intervention.alpha=nan"), tmp_path / "run")


def test_the_defaults_and_ordinary_values_pass(tmp_path: Path) -> None:
    cfg = run_config(_config("analysis.seed=4294967295", "analysis.n_boot=1000000", "analysis.temperature=1e-3",
                             "bench.conditions=[C0]"), tmp_path / "run")
    assert cfg.analysis.seed == 2**32 - 1 and cfg.analysis.n_boot == 1_000_000
    assert cfg.bench.spec.conditions == ("C0",)  # type: ignore[union-attr]


@dataclass(frozen=True)
class Spec:
    """A spec with no bounds of its own but a seed and a non-empty list."""

    x: float = 0.0
    n: int = 0
    seed: Seed = 0
    names: Annotated[tuple[str, ...], NonEmpty()] = ("a",)


def test_the_checker_bounds_any_spec() -> None:
    """The rules are the checker's, not one spec's: a float of any spec is finite, an int fits
    in 64 bits, a `Seed` is < 2^32 and a `NonEmpty` list has an entry."""
    assert build(Spec, {"x": 10**400 // 10**100, "n": -2**63, "seed": 0, "names": ["b"]}, "s").names == ("b",)
    for values, message in [({"x": float("-inf")}, "s.x: expected a finite number, got -inf"),
                            ({"x": 10**400}, "s.x: expected a finite number, got 1000"),
                            ({"n": 2**63}, "s.n: 9223372036854775808 does not fit in 64 bits"),
                            ({"seed": 2**32}, "s.seed: 4294967296 is out of range; expected a value < 4294967296"),
                            ({"names": []}, "s.names: expected a non-empty list, got []")]:
        with pytest.raises(ProbeInputError) as e:
            build(Spec, values, "s")
        assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize("override", ["analysis.temperature=inf", "bench.conditions=[]"])
def test_the_command_line_refuses_with_one_line_and_writes_nothing(override: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_probe(["model=tiny", "bench=demo", override,
                           f"hydra.run.dir={out}"], cwd=REPO_ROOT, env=probe_env(tmp_path / "cache"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"probe: error: {override.split('=')[0]}:" in proc.stderr
    assert (not out.exists() or not any(out.iterdir())) and not (tmp_path / "cache").exists()
