"""`probe run model=<name> bench=<name> [overrides]` (also `python -m probe …`): the Hydra entry point.

Hydra and DictConfig stop here: the composed config becomes a typed, validated `RunConfig`
before anything is written, and `probe.pipeline.execute.run` does the work. A bad value stops
with one line naming the key, the value and what is allowed (exit status 2); so does an
unknown key, checked before Hydra reads the command line (`probe.commands.overrides`).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from probe.backends.specs import check_device
from probe.commands import ls
from probe.commands.conftree import compose_tree
from probe.commands.interrupt import launcher_argv, resume_command, resume_hint
from probe.commands.overrides import check
from probe.commands.rundir import discard
from probe.config import build, package_conf_dir
from probe.errors import ProbeInputError, no_room, printable
from probe.judges.credentials import redacted
from probe.judges.spec import judge_kind
from probe.models import ModelSpec
from probe.models.availability import check_available
from probe.pipeline.spec import RunConfig, run_config
from probe.results.labels import label_slug
from probe.results.layout import HYDRA_CONFIG, HYDRA_OVERRIDES, REPORT_PAGE

# `model=hub model.hub_id=org/name` names its run after the checkpoint: ${basename:${model.hub_id}}
if not OmegaConf.has_resolver("basename"):
    OmegaConf.register_new_resolver(
        "basename", lambda ref: "hub" if ref in (None, "") else str(ref).rstrip("/").split("/")[-1])
# `run.label=…` ends the run directory's name: ${run_label:${run.label}} (`_<label as a name>`, or nothing)
if not OmegaConf.has_resolver("run_label"):
    OmegaConf.register_new_resolver("run_label", label_slug)




def _shard_gpu(*, _root_: DictConfig) -> str:
    """`backend.device=${shard_gpu:}`: shard i (`bench.shard=i/n`) of shards side by side on a
    node runs on visible GPU i mod (GPUs visible to its job)."""
    import torch

    shard = _root_.bench.shard
    if shard is None:
        raise ValueError("shard_gpu: this run is not a shard (set bench.shard=i/n)")
    n = torch.cuda.device_count()
    if n == 0:
        raise ValueError("shard_gpu: no GPU is visible to this job (cluster=local shows a job "
                         "hydra.launcher.gpus_per_node GPUs; its default 0 hides them all)")
    return f"cuda:{int(str(shard).split('/')[0]) % n}"


if not OmegaConf.has_resolver("shard_gpu"):
    OmegaConf.register_new_resolver("shard_gpu", _shard_gpu)


def main(argv: list[str]) -> None:
    """`probe run [overrides]` (also bare `probe [overrides]`): `--help` describes every key, else
    the overrides are checked before Hydra reads them and the run (or a `-m` sweep) starts."""
    try:
        checked = check(argv)
        if ("-h" in argv or "--help" in argv) and "--hydra-help" not in argv:
            print(ls.help_text(checked.first or compose_tree([])))
            return
    except ProbeInputError as e:
        print(f"probe: error: {printable(redacted(str(e)))}", file=sys.stderr)
        sys.exit(2)
    sys.argv = [sys.argv[0], *checked.argv]
    _run()


# An absolute path: the `probe` console script imports this module by name, where a relative
# path would be looked up as a Python module (`probe.conf`, not a package).
@hydra.main(version_base="1.3", config_path=str(package_conf_dir()), config_name="config")
def _run(cfg: DictConfig) -> None:
    with resume_hint(_resume_command):
        _main(cfg)


def _resume_command() -> str:
    hc = HydraConfig.get()
    # stderr is a log too: a URL's credentials stay out of it (the user adds them back)
    return redacted(resume_command(launcher_argv(), list(hc.overrides.task), list(hc.overrides.hydra),
                                   Path(hc.runtime.output_dir)))


def _main(cfg: DictConfig) -> None:
    out = Path(HydraConfig.get().runtime.output_dir)
    try:
        _hydra_wrote_nothing_into(out)
        values = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(values, dict)
        judge = values.get("judge") or {}
        overrides = list(HydraConfig.get().overrides.task)
        config = run_config(values, out, _judge_model(judge), overrides)
        if config.plan.loads_weights:
            check_device(config.backend.device)  # before the hub is asked for the model
        _models_available(config)
        if config.judged and config.judge.name != judge.get("name"):
            cfg.judge.name = config.judge.name  # the bench's default judge: recorded as the one that judged
        record = {HYDRA_CONFIG: redacted(OmegaConf.to_yaml(cfg, resolve=True)),  # no URL's credentials on disk
                  HYDRA_OVERRIDES: redacted(OmegaConf.to_yaml(overrides))}
        written = _written(config, record)
    except ProbeInputError as e:
        # once, on stderr (Hydra's job logging goes to stdout: logging it too printed it twice)
        print(f"probe: error: {printable(redacted(str(e)))}", file=sys.stderr)
        if discard(out):
            print(f"probe: run directory kept: {out} (this run's files so far); resume with: {_resume_command()}",
                  file=sys.stderr)
        sys.exit(2)
    print(printable(_last_line(written, config.dry_run)))  # a path is data too


def _written(config: RunConfig, record: dict[str, str]) -> Path:
    """Run it; a full disk or a file-size limit met while writing is the user's one line."""
    # torch and transformers take seconds to import: only once the inputs are checked
    from probe.pipeline.execute import run

    try:
        return run(replace(config, launch_record=record))
    except OSError as e:
        if (short := no_room(e)) is None:
            raise
        raise short from e


def _last_line(out: Path, dry_run: bool) -> str:
    """What a run prints last: the page to open when the run wrote one, else its directory."""
    if dry_run:
        return f"probe: dry run: prompts written to {out}"
    page = out / REPORT_PAGE
    return f"probe: run written to {out}; open {page}" if page.is_file() else f"probe: run written to {out}"


def _models_available(config: RunConfig) -> None:
    """The run's model and its LLM judge's can be had (cached, downloadable or local), asked
    before the bench's data is read or a model library imported."""
    check_available(config.model, weights=not config.dry_run)
    if config.judge_model is not None and config.judged and config.judge.kind.needs_local_model:
        check_available(config.judge_model, weights=not config.dry_run, key="judge.model")


def _hydra_wrote_nothing_into(out: Path) -> None:
    """The run directory is probe's to claim only if nothing was written there before probe's
    code ran: Hydra's own `.hydra/` (`hydra.output_subdir`) and a job log file would make a new
    directory look like someone else's, and overwrite what a reused one holds."""
    subdir = HydraConfig.get().output_subdir
    if subdir is not None:
        raise ProbeInputError(f"hydra.output_subdir={subdir}: Hydra writes its config into the run directory before "
                              "probe has claimed it; probe records .hydra/config.yaml and overrides.yaml itself once "
                              "the directory is its own — leave hydra.output_subdir unset (null)")
    logs = [h.baseFilename for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)
            and out.resolve() in Path(h.baseFilename).resolve().parents]
    if logs:
        raise ProbeInputError(f"hydra/job_logging writes {logs[0]} into the run directory before probe has claimed "
                              "it; keep probe's console logging (drop the hydra/job_logging override) or log elsewhere")


def _judge_model(judge: dict) -> ModelSpec | None:
    """`judge.model` of an LLM judge: a model config name (read here, where the config tree
    lives), or like `model=hub` any hub id (`org/name`) or local directory; the HTTP judge's
    `model` is the API's model name."""
    name = judge.get("model")
    if not name or judge.get("name") is None or not judge_kind(judge["name"]).needs_local_model:
        return None
    path = package_conf_dir() / "model" / f"{name}.yaml"
    if not path.is_file():
        if "/" in str(name) or Path(str(name)).expanduser().is_dir():
            return ModelSpec(name=str(name).rstrip("/").split("/")[-1], kind="auto", hub_id=str(name), dtype="auto")
        raise ProbeInputError(f"judge.model: {name!r} is neither a model config in conf/model nor a hub id "
                              "(org/name) or a local directory")
    values = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert isinstance(values, dict)
    return build(ModelSpec, values, f"judge.model ({name})")

