"""Checkpoint sweeps through Hydra multirun and the submitit launchers (conf/cluster).

`cluster=local` runs for real: one fresh process per model, one after the other, each writing its
run into hydra.sweep.dir/hydra.sweep.subdir. `cluster=slurm` is only composed (nothing submitted).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_probe
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
MODELS = ("tiny", "tiny-gemma3")
RUN_FILES = ("DONE", "metrics.json", "prompts.parquet", "scores.parquet", "manifest.json")


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


@pytest.mark.slow
def test_local_sweep_runs_one_directory_per_model(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    env = {**os.environ, "PROBE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "probe", "-m", f"model={','.join(MODELS)}", "bench=demo",
         "bench.conditions=[C0]", "cluster=local", f"hydra.sweep.dir={sweep}",
         "analysis.n_boot=50", "progress=false"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    # Besides the runs, the sweep dir holds multirun.yaml, submitit's hidden .submitit/ and the
    # sweep report the multirun wrote when it ended.
    assert (sweep / "report" / "report.html").is_file()
    runs = sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "report")
    assert [p.name for p in runs] == [f"{i}_demo_{m}" for i, m in enumerate(MODELS)]
    for run, model in zip(runs, MODELS):
        for name in RUN_FILES:
            assert (run / name).is_file(), f"{run.name}/{name}"
        assert json.loads((run / "metrics.json").read_text())["model"] == model
    assert (sweep / "multirun.yaml").is_file()
    # the sweep ends with its headline table in the terminal, not only in .submitit/* logs
    tail = proc.stdout[proc.stdout.rindex("DiSCo:"):]
    assert re.search(r"^\| run \| bench \| KL \|", tail, re.M), tail
    for model in MODELS:
        assert re.search(rf"^\| {re.escape(model)}( ⚠)? \| demo \| \d", tail, re.M), tail
    assert f"probe: sweep report written to {sweep / 'report' / 'report.html'}" in tail
    _sweep_report_renders(sweep)


def _sweep_report_renders(sweep: Path) -> None:
    """`python -m probe report <sweep>`: one DiSCo table row per model, and the HTML page renders
    in headless Chromium with every figure loaded."""
    import re
    import shutil

    proc = run_probe(["report", str(sweep)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    md = (sweep / "report" / "report.md").read_text()
    # ⚠ marks a run whose answers the letter drives (random tiny models mostly are)
    assert re.search(r"\| tiny( ⚠)? \| instruct \| demo \|", md) and re.search(r"\| tiny-gemma3( ⚠)? \| instruct", md)
    html = sweep / "report" / "report.html"
    n_figures = html.read_text().count('<img src="data:image/png;base64,')
    assert n_figures == 2  # C0 only: the culture × model heatmap and the Lorenz curves (SL vs PSI needs C1, C2)
    if shutil.which("chromium") is None:
        return  # CI installs Debian's chromium; tests/report/test_figures.py reports the skip
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run",
                          f"--user-data-dir={sweep / 'chromium'}", "--virtual-time-budget=5000", "--dump-dom",
                          html.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert re.search(rf'data-images-loaded="{n_figures}"', dom)


def test_slurm_cluster_composes_with_overrides() -> None:
    cfg = _compose(["cluster=slurm", "hydra.launcher.partition=gpu"])
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.partition == "gpu"
    assert launcher.tasks_per_node == 1 and launcher.nodes == 1
    for key in ("gpus_per_node", "timeout_min", "mem_gb", "cpus_per_task", "account", "array_parallelism"):
        assert key in launcher, key
    sweep = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)  # job.num only exists in a job
    assert sweep["subdir"] == "${probe_subdir:}"  # probe.commands.hydra_callbacks.job_subdir


def test_local_cluster_runs_jobs_one_at_a_time_without_gpus() -> None:
    cfg = _compose(["cluster=local"])
    assert cfg.hydra.launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"
    assert cfg.hydra.launcher.gpus_per_node == 0 and cfg.hydra.sweeper.max_batch_size == 1


def test_default_keeps_hydras_basic_launcher() -> None:
    cfg = _compose([])
    assert cfg.hydra.runtime.choices.get("cluster") is None
    assert cfg.hydra.launcher._target_ == "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
    assert cfg.hydra.sweeper.max_batch_size is None
    assert "cluster" not in cfg


def _job_config(sweep: Path, num: int, overrides: list[str]) -> DictConfig:
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}, "job": {"num": num},
                                       "overrides": {"task": overrides}},
                             "bench": {"name": "demo"}, "model": {"name": "tiny"}})


def test_job_directories_name_the_overrides_the_sweep_varies(tmp_path: Path) -> None:
    from probe.commands.hydra_callbacks import job_subdir

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    job = ["model=tiny", "bench=demo", "analysis.n_boot=50", "intervention.alpha=4", "model.hub_id=org/b",
           "progress=false"]
    assert job_subdir(_root_=_job_config(sweep, 3, job)) == \
        "3_demo_tiny_analysis.n_boot-50_intervention.alpha-4_model.hub_id-org_b"  # no multirun.yaml: all that count
    OmegaConf.save({"hydra": {"overrides": {"task": ["model=tiny,tiny-gemma3", "bench=demo", "analysis.n_boot=50",
                                                     "intervention.alpha=0,4", "model.hub_id=org/a,org/b",
                                                     "progress=false"]}}}, sweep / "multirun.yaml")
    assert job_subdir(_root_=_job_config(sweep, 3, job)) == "3_demo_tiny_intervention.alpha-4_model.hub_id-org_b"
    assert job_subdir(_root_=_job_config(sweep, 0, job[:3])) == "0_demo_tiny"


def test_job_directory_names_can_be_passed_back_to_hydra(tmp_path: Path) -> None:
    """`hydra.run.dir=<sweep>/<job dir>` (resume one job, rerun a shard) must parse as typed: no
    `=`, `,`, brackets, quotes, `~` or non-ASCII letters in the name."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from probe.commands.hydra_callbacks import capped, job_subdir

    job = ["model=tiny", "bench=demo", "bench.shard=1/3", "bench.conditions=[C0,C1]", "bench.name='a b'",
           "bench.languages=[日本語]", "intervention.alpha=-4"]
    name = job_subdir(_root_=_job_config(tmp_path, 7, job))
    assert name == "7_demo_tiny_bench.shard-1_3_bench.conditions-_C0_C1__bench.name-_a_b__bench.languages-_____" \
        "_intervention.alpha--4"
    for value in (name, capped(name + "x" * 200)):
        parsed = OverridesParser.create().parse_overrides([f"hydra.run.dir={tmp_path}/{value}"])
        assert parsed[0].value() == f"{tmp_path}/{value}"


def test_long_job_directory_names_are_cut_and_hashed() -> None:
    from probe.commands.hydra_callbacks import SUBDIR_BYTES, capped

    assert capped("0_demo_tiny") == "0_demo_tiny"
    a, b = capped("0_demo_tiny_bench.path=" + "é" * 300 + "a"), capped("0_demo_tiny_bench.path=" + "é" * 300 + "b")
    assert a != b and len(a.encode()) <= SUBDIR_BYTES and len(b.encode()) <= SUBDIR_BYTES
    assert a.startswith("0_demo_tiny_bench.path=éé") and re.fullmatch(r".*@[0-9a-f]{10}", a)


def test_a_sweep_over_long_values_runs_into_short_distinct_directories(tmp_path: Path) -> None:
    """A job directory naming swept values longer than a file name may be (here a bench name of
    100 characters, the longest allowed, twice in the name) once stopped the sweep with Hydra's
    traceback; each job's directory now names what it varies, cut and hashed."""
    sweep, long = tmp_path / "sweep", "x" * 100
    env = {**os.environ, "PROBE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["-m", "model=tiny", "bench=demo", f"bench.name={long},demo", "analysis.temperature=0.5,2.0",
                      "dry_run=true", f"hydra.sweep.dir={sweep}"], cwd=REPO_ROOT, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    names = sorted(p.name for p in sweep.iterdir() if p.is_dir())
    assert len(names) == 4 and all(len(n.encode()) <= 160 and (sweep / n / "prompts.parquet").is_file() for n in names)
    assert "2_demo_tiny_bench.name-demo_analysis.temperature-0.5" in names
    assert "3_demo_tiny_bench.name-demo_analysis.temperature-2.0" in names
    assert "probe: no sweep report: no finished probe runs" in proc.stderr  # dry runs finish nothing
