"""Hydra callbacks of the entry point (`hydra.callbacks` in `conf/config.yaml`): checks that
must run before Hydra itself acts, where `probe.commands.run` cannot catch what fails; the sweep
report a multirun ends with; and `${probe_subdir:}`, the name of a multirun job's directory."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from probe.commands.rundir import make_dirs
from probe.errors import ProbeInputError, os_errors, printable
from probe.files import check_name
from probe.results.labels import check_label

SUBDIR_BYTES = 160
"""Longest job directory name: well under the 255 bytes file systems allow, so a sweep over long
values (paths, hub ids) stays creatable; longer names keep a prefix and a hash of the whole."""
NAMED_KEYS = frozenset({"model", "bench"})
"""Overrides already in the name (`<num>_<bench.name>_<model.name>`)."""
UNNAMED_KEYS = frozenset({"cluster", "progress", "shard_size", "part_seconds", "dry_run", "predict_device"})
"""Overrides that do not change a run's results: left out of its name when all are listed."""


class RunDirCheck(Callback):
    """Creates the run (or sweep) directory before Hydra does, so a path the file system refuses
    — a name longer than it allows, a parent that is a file, no write permission — stops with
    one line and exit status 2 instead of Hydra's traceback. At a multirun's end, writes the
    sweep report (`<sweep dir>/report`) and prints its headline tables."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _names_are_names(config)
        create_dir(str(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _names_are_names(config)
        create_dir(str(config.hydra.sweep.dir), "hydra.sweep.dir")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        print_sweep_end(Path(str(config.hydra.sweep.dir)))


def _names_are_names(config: DictConfig) -> None:
    """`bench.name` names the run's directory (`runs/<bench.name>/…`): refused, with one line and
    exit status 2, when it could lead outside it (`../../x`), before any directory is made."""
    try:
        check_name(OmegaConf.select(config, "bench.name", default="bench"), "bench.name")
        check_label(OmegaConf.select(config, "run.label", default=None))
    except ProbeInputError as e:
        print(f"probe: error: {printable(str(e))}", file=sys.stderr)
        sys.exit(2)


def create_dir(path: str, key: str) -> None:
    """`mkdir -p path`, or print the one-line refusal and exit 2."""
    try:
        with os_errors(f"{key}={path}", "choose a shorter path, or one where you can write"):
            make_dirs(path)  # remembered: a run refused before writing takes it away again
    except ProbeInputError as e:  # Hydra's logging is not set up yet: stderr only
        print(f"probe: error: {printable(str(e))}", file=sys.stderr)
        sys.exit(2)


def print_sweep_end(sweep: Path) -> None:
    """Write the sweep report of `sweep` and print its headline tables; a sweep without a
    finished run (a dry run, every job failed) says so in one line instead."""
    from probe.report.entries import find_runs, read_entries  # the report's plotting stack: only now
    from probe.report.sweep import sweep_headlines, write_sweep_report
    from probe.results.layout import REPORT, SWEEP_REPORT

    try:
        html = write_sweep_report([sweep], sweep / SWEEP_REPORT)
        entries, _ = read_entries([sweep])
        unfinished = find_runs([sweep])[1]
    except ProbeInputError as e:
        print(f"probe: no sweep report: {e}", file=sys.stderr)
        return
    full = sweep / SWEEP_REPORT / REPORT
    print(f"\n{sweep_headlines(entries, unfinished, full)}\nprobe: sweep report written to {html}", flush=True)


def job_subdir(*, _root_: DictConfig) -> str:
    """`hydra.sweep.subdir`: `<job num>_<bench.name>_<model.name>`, then the job's values of the
    swept keys (`intervention.alpha-4_analysis.temperature-0.5`), and a name over `SUBDIR_BYTES`
    is cut and completed by a hash of the whole. The name is a plain Hydra value (see `plain`),
    so `hydra.run.dir=<sweep>/<name>` resumes or reruns one job as typed; the job number keeps
    names unique when characters are replaced."""
    hydra = _root_.hydra
    swept = swept_keys(Path(str(hydra.sweep.dir)) / "multirun.yaml")
    overrides = [o for o in hydra.overrides.task if _key(o) not in NAMED_KEYS
                 and (_key(o) in swept if swept is not None else _key(o) not in UNNAMED_KEYS)]
    name = "_".join([f"{hydra.job.num}_{_root_.bench.name}_{_root_.model.name}", *overrides])
    return capped(plain(name))


def plain(name: str) -> str:
    """`name` with `=` as `-` and every character other than ASCII letters, digits and `_.+-` as
    `_`: Hydra's override grammar reads `=`, `,`, brackets, quotes, `~` and non-ASCII letters in an
    unquoted value as syntax (a directory named `…_bench.shard=1_3` cannot be passed back as
    `hydra.run.dir=`), and `/` would make a subdirectory."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name.replace("=", "-"))


def swept_keys(multirun_yaml: Path) -> frozenset[str] | None:
    """The keys the sweep varies (`model=a,b`, `x=range(3)`), read from the overrides Hydra's
    sweeper recorded in `multirun.yaml` before launching the jobs; None when there is none."""
    if not multirun_yaml.is_file():
        return None
    overrides = OmegaConf.load(multirun_yaml).hydra.overrides.task
    try:
        parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    except HydraException:  # Hydra parsed these very overrides; a failure here is not the user's
        return None
    return frozenset(o.key_or_group for o in parsed if o.is_sweep_override())


def capped(name: str, limit: int = SUBDIR_BYTES) -> str:
    """`name`, or when longer than `limit` bytes (UTF-8) its longest prefix that leaves room for
    `@` and 10 hex digits of its sha256 (`@`: a character Hydra's grammar allows unquoted)."""
    data = name.encode()
    if len(data) <= limit:
        return name
    digest = hashlib.sha256(data).hexdigest()[:10]
    return data[:limit - 11].decode(errors="ignore") + "@" + digest


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


# Registered on import: Hydra imports this module (to build the callbacks) in the process that
# launches a sweep and, unpickling them, in every submitit job, before it names the job's directory.
if not OmegaConf.has_resolver("probe_subdir"):
    OmegaConf.register_new_resolver("probe_subdir", job_subdir)
