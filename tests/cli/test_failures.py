"""Failures that say what to do, once, fast: a hub model the run cannot get stops in one line
within seconds; an error raised during a run prints once; a refused run leaves no directory
behind; each judged bench has a default judge, and a judge it cannot use is refused naming the
options that work."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probe.benches.registry import BUILTIN
from probe.benches.task import Task
from probe.commands import ls, rundir
from probe.commands.conftree import compose_tree
from probe.commands.overrides import check
from probe.errors import ProbeInputError
from probe.models import ModelSpec
from probe.models.availability import LOCAL_COPY, check_available
from probe.pipeline.spec import run_config

pytestmark = pytest.mark.slow  # model runs as new processes (signals, timings, scripts)

REPO_ROOT = Path(__file__).resolve().parents[2]
OFFLINE_LIMIT_S = 10.0
"""How long a hub model the run cannot get may take to be refused (imports included)."""


def _probe(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`python -m probe args` offline, with an empty hub cache; its result and wall time."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp / "hf"), "PROBE_CACHE": str(tmp / "cache")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "probe", *args, f"hydra.run.dir={tmp / 'runs' / 'x'}"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    return proc, time.perf_counter() - t0


@pytest.mark.parametrize("model", [("model=gemma-3-12b",), ("model=gemma-3-12b", "model.hub_id=google/gemma-3-12b-itt")],
                         ids=["uncached", "misspelt"])
def test_an_unreachable_hub_model_fails_fast_in_one_line(model: tuple[str, ...], tmp_path: Path) -> None:
    """Refused in seconds (before any data or model library), on stderr only and once: the
    run's errors were also logged to stdout before."""
    proc, wall_s = _probe(tmp_path, *model, "bench=disco", "dry_run=true")
    assert proc.returncode == 2 and wall_s < OFFLINE_LIMIT_S, (proc.returncode, wall_s, proc.stderr)
    hub_id = model[-1].split("=")[-1] if len(model) > 1 else "google/gemma-3-12b-it"
    assert proc.stdout == "" and proc.stderr == (
        f"probe: error: model 'gemma-3-12b' needs {hub_id}'s config and tokenizer (a dry run loads no weights), "
        f"which are not in the hub cache {tmp_path / 'hf' / 'hub'}, and the hub cannot be reached (HF_HUB_OFFLINE=1); "
        f"download them once where it can (same HF_HOME), or point at a local copy with {LOCAL_COPY}\n")
    assert not (tmp_path / "runs").exists()  # nor the parents the launch made for it


def test_the_local_copy_key_is_spelled_alike_in_help_and_docs() -> None:
    assert LOCAL_COPY in ls.help_text(compose_tree(["model=gemma-3-12b"]))
    for page in ("docs/running/offline.md", "docs/troubleshooting.md"):
        assert LOCAL_COPY in (REPO_ROOT / page).read_text(), page


def test_a_refused_run_takes_away_only_what_its_launch_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rundir, "MADE", [])
    rundir.make_dirs(tmp_path / "a" / "b" / "run")
    assert rundir.discard(tmp_path / "a" / "b" / "run") is False and list(tmp_path.iterdir()) == []
    rundir.make_dirs(tmp_path / "hydra")
    (tmp_path / "hydra" / ".hydra").mkdir()
    (tmp_path / "hydra" / ".hydra" / "config.yaml").write_text("x: 1\n")
    assert rundir.discard(tmp_path / "hydra") is False and not (tmp_path / "hydra").exists()
    rundir.make_dirs(tmp_path / "started")
    (tmp_path / "started" / "prompts.parquet").write_text("")
    assert rundir.discard(tmp_path / "started") is True and (tmp_path / "started" / "prompts.parquet").exists()
    earlier = tmp_path / "earlier"  # results from before this launch, e.g. a run to resume
    (earlier / ".hydra").mkdir(parents=True)
    assert rundir.discard(earlier) is False and (earlier / ".hydra").is_dir()


JUDGED = [t for t in BUILTIN if t.answers == "open" and t.judging.judges]


@pytest.mark.parametrize("task", JUDGED, ids=lambda t: t.kind)
def test_a_judged_bench_without_a_judge_option_uses_its_default(task: Task, tmp_path: Path) -> None:
    values = compose_tree([f"bench={task.kind}"]).values
    config = run_config(values, tmp_path, overrides=[f"bench={task.kind}"])
    assert config.judged and config.judge.name == task.judging.default == task.judging.judges[0]


def test_blend_judge_refusals_name_the_option_that_works(tmp_path: Path) -> None:
    works = "judge=blend_rules (the default: no judge option), judge=llm, judge=http"
    values = compose_tree(["bench=blend", "judge=rules"]).values
    with pytest.raises(ProbeInputError) as refused:
        run_config(values, tmp_path, overrides=["bench=blend", "judge=rules"])
    assert str(refused.value) == f"judge=rules cannot judge BLEnD; its judges: {works}"
    with pytest.raises(ProbeInputError) as refused:
        check(["bench=blend", "judge=nonesuch"])
    assert str(refused.value) == f"judge=nonesuch: no such judge; BLEnD's judges: {works} (probe ls judges)"
    check(["bench=blend", "judge=blend_rules"])  # each bench's judge has its own entry in the judge group
    assert f"without a judge option, bench=blend judges with its default: {works.split(' ')[0]}" in \
        ls.help_text(compose_tree(["bench=blend"]))
    listing = ls.listing(["judges"])
    assert "  blend_rules " in listing
    assert "  bench=blend          judge=blend_rules, judge=llm, judge=http" in listing.splitlines()


def test_the_model_check_reads_the_hub_cache_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo, commit = tmp_path / "models--org--cached", "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    for name in ("config.json", "tokenizer.json"):
        (repo / "snapshots" / commit / name).write_text("{}")
    check_available(ModelSpec(name="m", kind="auto", hub_id="org/cached"), weights=True)
    with pytest.raises(ProbeInputError, match=r"^model 'm' needs org/absent's config, tokenizer and weights, which"):
        check_available(ModelSpec(name="m", kind="auto", hub_id="org/absent"), weights=True)
    with pytest.raises(ProbeInputError, match=r"^judge.model 'j': ./nowhere is not a directory; model.hub_id=<directory>"):
        check_available(ModelSpec(name="j", kind="auto", hub_id="./nowhere"), weights=False, key="judge.model")


def test_a_model_about_to_be_downloaded_is_named_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """With the hub reachable, a model not in the cache passes the check, and the log says what is
    fetched (a dry run: the config and tokenizer only) before the download starts."""
    import logging

    from huggingface_hub import constants

    import probe.models.availability as availability

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(availability, "hub_reachable", lambda: True)
    with caplog.at_level(logging.INFO, logger="probe.models.availability"):
        check_available(ModelSpec(name="g", kind="auto", hub_id="org/absent"), weights=False)
    assert caplog.messages == [f"model 'g': downloading org/absent's config and tokenizer (a dry run loads no weights) "
                               f"from the hub into {tmp_path}"]
