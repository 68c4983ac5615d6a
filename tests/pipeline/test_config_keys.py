"""Every top-level config key is declared once, as a `RunConfig` field: the keys the config accepts
(`TOP_LEVEL`), the plain values passed through to the run, `probe ls`'s run options and the
generated `config.yaml` all derive from it, so a key added there reaches the run (and one not
added there is refused, never dropped and run at its default)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from probe.commands import confgen, conftree
from probe.config import package_conf_dir
from probe.errors import ProbeInputError
from probe.pipeline.spec import NOT_CONFIG, TOP_LEVEL, RunConfig, pass_through, run_config, top_level, typed_config


def _values(*overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "bench=demo", *overrides])
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    return {k: v for k, v in values.items() if k not in ("hydra", "cluster")}


@dataclass(frozen=True)
class WithNewKey(RunConfig):
    """`RunConfig` with one more top-level key, added in that one place."""

    new_key: int = 3
    entry_only: str = field(default="", metadata=NOT_CONFIG)


def test_a_key_added_once_reaches_the_run(tmp_path: Path) -> None:
    assert "new_key" in top_level(WithNewKey) and "new_key" in pass_through(WithNewKey)
    assert "entry_only" not in top_level(WithNewKey)
    cfg = typed_config(WithNewKey, {**_values(), "new_key": 7}, {"out_dir": tmp_path / "run"})
    assert isinstance(cfg, WithNewKey) and cfg.new_key == 7
    assert any(line.startswith("new_key: 3") for line in confgen.block(WithNewKey, keys=pass_through(WithNewKey)))
    with pytest.raises(ProbeInputError, match=r"unknown top-level key\(s\) \['new_key'\]"):
        run_config({**_values(), "new_key": 7}, tmp_path / "run")  # not a RunConfig key: refused, not dropped


def test_every_key_of_the_composed_tree_is_a_field_and_every_plain_one_reaches_the_run(tmp_path: Path) -> None:
    values = _values("progress=false", "shard_size=7", "part_seconds=2", "dry_run=true", "predict_device=cpu",
                     "max_variants=9")
    assert set(values) == set(TOP_LEVEL)  # the generated tree holds every key and no other
    cfg = run_config(values, tmp_path / "run")
    for key in pass_through():
        assert getattr(cfg, key) == (tuple(values[key]) if isinstance(values[key], list) else values[key]), key
    assert set(conftree.run_options()) - {k for k in conftree.run_options() if k.startswith("run.")} == set(
        pass_through())
    assert {f.name for f in fields(RunConfig) if f.init} - set(TOP_LEVEL) == {"out_dir", "judge_model",
                                                                              "launch_record"}
