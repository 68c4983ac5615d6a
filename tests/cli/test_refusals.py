"""Refusals with one line instead of a traceback or a silent result: a chat template that drops
the user message, a finished run missing a stored table, and file-system failures at known steps
(a run directory name the file system refuses, an unusable $PROBE_CACHE, a checkpoint directory
without its tokenizer)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import probe_env, run_probe

from probe.errors import ProbeInputError

REPO_ROOT = Path(__file__).resolve().parents[2]
DROPS_THE_USER = ("{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
                  "{% if message['role'] != 'user' %}{{ message['content'] }}{% endif %}"
                  "{% if not (loop.last and message['role'] == 'assistant') %}{{ '<|im_end|>\\n' }}{% endif %}"
                  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def _run(out: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path, *overrides: str,
         edit: Callable[[Any], None] | None = None) -> Path:
    """A tiny-model DiSCo run (C0 only) in-process; `edit(loaded)` changes the loaded model."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import probe.pipeline.execute as pipeline
    from probe.config import package_conf_dir
    from probe.pipeline.spec import run_config

    if edit is not None:
        load = pipeline.load_model

        def edited(*args: Any, **kwargs: Any) -> Any:
            loaded = load(*args, **kwargs)
            edit(loaded)
            return loaded

        monkeypatch.setattr(pipeline, "load_model", edited)
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "bench=disco", f"bench.path={disco_csv}",
                                                       "bench.conditions=[C0]", "analysis.n_boot=20",
                                                       "progress=false", *overrides])
    return pipeline.run(run_config(OmegaConf.to_container(cfg, resolve=True), out))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PROBE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_template_that_drops_the_user_message_is_refused(dry_run: bool, tmp_path: Path, cache: Path,
                                                           monkeypatch: pytest.MonkeyPatch, disco_csv: Path) -> None:
    """Before: 12 identical prompts (156 on all conditions) were scored as if they were 12 items."""
    def drop_user(loaded: Any) -> None:
        loaded.tokenizer.chat_template = DROPS_THE_USER

    out = tmp_path / "run"
    with pytest.raises(ProbeInputError) as e:
        _run(out, monkeypatch, disco_csv, f"dry_run={str(dry_run).lower()}", edit=drop_user)
    message = str(e.value)
    assert message.startswith("model 'tiny': the chat template of ") and "\n" not in message
    assert "renders 12 distinct prompts as only 1 distinct text(s): prompts 0 (item 'item-0') and 1" in message
    assert "drops the user message" in message
    assert not (out / "prompts.parquet").exists() and not (out / "run_key.json").exists()


def test_distinct_prompts_pass_the_rendering_check(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                   disco_csv: Path) -> None:
    out = _run(tmp_path / "run", monkeypatch, disco_csv, "dry_run=true")
    assert (out / "prompts.parquet").is_file()


def test_a_finished_run_missing_a_table_is_an_error_and_missing_metrics_are_recomputed(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path) -> None:
    """Before: a DONE run whose scores.parquet was deleted reran as "nothing to do", rc 0."""
    out = _run(tmp_path / "run", monkeypatch, disco_csv)
    metrics = json.loads((out / "metrics.json").read_text())
    (out / "metrics.json").unlink()  # derived: recomputed from the tables
    _run(out, monkeypatch, disco_csv)
    assert json.loads((out / "metrics.json").read_text())["expected"] == metrics["expected"]
    (out / "scores.parquet").unlink()  # stored: its checkpoints went at DONE, nothing to resume from
    with pytest.raises(ProbeInputError, match=r"holds a finished run \(DONE\) whose scores.parquet is missing; a "
                                              r"finished run keeps no checkpoints to resume from"):
        _run(out, monkeypatch, disco_csv)


def test_a_run_directory_name_too_long_is_one_line(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                   disco_csv: Path) -> None:
    long = tmp_path / ("x" * 300)
    with pytest.raises(ProbeInputError, match=r"run directory .*x{300}: File name too long; choose a shorter path"):
        _run(long, monkeypatch, disco_csv)
    proc = run_probe(["model=tiny", "bench=demo", f"hydra.run.dir={long}"],
                          cwd=REPO_ROOT, env=probe_env(cache), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"probe: error: hydra.run.dir={long}: File name too long")


def test_an_unusable_cache_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("PROBE_CACHE", str(tmp_path / "file" / "cache"))
    with pytest.raises(ProbeInputError, match=r"model 'tiny': Not a directory \(.*file/cache/tiny\); .*\$PROBE_CACHE "
                                              r"a writable directory"):
        _run(tmp_path / "run", monkeypatch, disco_csv)


def test_a_checkpoint_without_its_tokenizer_is_one_line(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
                                                        disco_csv: Path) -> None:
    from probe.models import ModelSpec, load_model
    from probe.models.tiny import TinySpec

    built = load_model(ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec()), weights=False)
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(built.info["path"], checkpoint)
    for f in checkpoint.glob("tokenizer*"):
        f.unlink()
    with pytest.raises(ProbeInputError, match=rf"model 'checkpoint': no tokenizer could be built from {checkpoint} "):
        _run(tmp_path / "run", monkeypatch, disco_csv, "model=hub", f"model.hub_id={checkpoint}",
             "model.name=checkpoint")
