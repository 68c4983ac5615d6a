"""The config files under `conf/` whose keys mirror a spec dataclass are generated from it,
so every default and its one-line description live in one place: the dataclass.

    python -m probe.commands.confgen          # rewrite the generated files
    python -m probe.commands.confgen --check  # exit 1 if any differs (the test suite runs this check)

Generated: `config.yaml` (its `analysis` block and run options), `backend/*.yaml`,
`judge/*.yaml`, and `bench/<kind>.yaml` of every built-in bench. Hand-written: model entries
(`model/*.yaml`: values, not defaults), bench variants that inherit a generated file and set
only what differs (`bench/demo.yaml`), and `cluster/*.yaml` (launcher settings).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from probe.backends.specs import BACKENDS
from probe.benches.registry import BUILTIN
from probe.config import describe_fields, package_conf_dir
from probe.files import make_dirs, write_text
from probe.judges import JudgeSpec, judge_kind
from probe.judges.registry import MECHANISMS, judge_about, judge_names
from probe.pipeline.intervention import INTERVENTIONS
from probe.pipeline.run_info import RunInfo
from probe.pipeline.spec import AnalysisSpec, RunConfig, pass_through

COMMENT_COLUMN = 32


@dataclass(frozen=True)
class Generated:
    """One generated file: its header, the spec it mirrors, and the entry's own values."""

    path: str
    header: str
    spec: type
    values: Mapping[str, Any] = field(default_factory=dict)
    """Values of this entry that differ from the spec's defaults (e.g. `name`)."""
    keys: Sequence[str] | None = None
    """The keys to write (None: every field)."""


def _value(v: Any) -> str:
    if isinstance(v, tuple):
        v = list(v)
    text = yaml.safe_dump(v, default_flow_style=True, allow_unicode=True, width=1 << 16).strip()
    return text.removesuffix("...").strip()


def block(spec: type, values: Mapping[str, Any] | None = None, keys: Sequence[str] | None = None,
          indent: str = "") -> list[str]:
    """`key: value  # description` lines of a spec's fields (its defaults, updated by `values`)."""
    lines = []
    for name, _, default, doc in describe_fields(spec):
        if keys is not None and name not in keys:
            continue
        text = f"{indent}{name}: {_value((values or {}).get(name, default))}"
        lines.append(f"{text.ljust(COMMENT_COLUMN)}  # {doc}" if doc else text)
    return lines


def _summary(cls: type) -> str:
    """The first paragraph of a class's docstring, on one line."""
    return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())


def default_backend() -> str:
    """The backend a run uses when none is chosen: `RunConfig.backend`'s default."""
    backend = next(f for f in fields(RunConfig) if f.name == "backend")
    return str(backend.default_factory().name)  # type: ignore[misc]


def entries() -> list[Generated]:
    """Every generated file of the config tree."""
    # each registered backend, its spec's own words (`probe.backends.specs.BACKENDS`)
    out = [Generated(f"backend/{name}.yaml", f"# backend={name}{' (default)' if name == default_backend() else ''} "
                     f"— {_summary(spec)}", spec) for name, spec in BACKENDS.items()]
    out += [
        Generated("judge/auto.yaml", "# judge=auto (default) — the bench's own default judge (`probe ls judges`); a "
                  "judged run records the judge that judged.", JudgeSpec, {}, ("name",)),
        Generated("judge/llm.yaml", "# judge=llm — an LLM judge on a model config; validated JSON verdicts, "
                  "retried, else judge_error.", JudgeSpec, {"name": "llm"}, judge_kind("llm").keys),
        Generated("judge/http.yaml", "# judge=http judge.base_url=http://127.0.0.1:8000/v1 judge.model=<served "
                  "model> — an OpenAI-compatible endpoint.", JudgeSpec, {"name": "http", "max_new_tokens": 256},
                  judge_kind("http").keys),
    ]
    # each bench's deterministic judges, from the judges registry (its own words, its own entry)
    out += [Generated(f"judge/{name}.yaml", f"# judge={name} — {judge_about(name)}", JudgeSpec, {"name": name},
                      judge_kind(name).keys) for name in judge_names() if name not in MECHANISMS]
    out += [Generated(f"intervention/{name}.yaml", f"# intervention={name} — {(spec.__doc__ or '').strip()}", spec)
            for name, spec in INTERVENTIONS.items()]
    for task in BUILTIN:
        doc = _summary(task.data.spec_type)
        what = doc.partition(": ")[2] or doc  # the docstring's "The `bench:` block of X: <what X is>"
        out.append(Generated(f"bench/{task.kind}.yaml", f"# python -m probe bench={task.kind} — {task.title}: {what}",
                             task.data.spec_type))
    return out


CONFIG_HEAD = """\
# probe run model=<name> bench=<name> [key=value ...]   (= python -m probe model=… bench=…)
# The embedded default: the demo bench on SmolLM2-135M-Instruct (offline via its GGUF copy).
# Generated from the spec dataclasses by `python -m probe.commands.confgen`; edit those, not this file.
defaults:
  - model: smollm2-135m
  - bench: demo
  - backend: {backend}
  - judge: auto
  - intervention: none
  - _self_
  - cluster: null    # multirun launcher: cluster=slurm or cluster=local (conf/cluster); none: Hydra's basic launcher
  - override hydra/job_logging: stdout   # logs to the console (SLURM: submitit's log files), not into the run dir

analysis:
"""
BENCH_SHARD = """
bench:                            # every bench, built-in or plugin, takes `shard` (probe.pipeline.shard_plan)
  shard: null                     # i/n: score one of n slices of whole items into this run dir; merge: python -m probe merge
"""
CONFIG_TAIL = """
hydra:
  output_subdir: null   # probe writes the run's .hydra/config.yaml itself, once it holds the directory
  callbacks:
    run_dir:            # a run directory the file system refuses stops with one line, before Hydra makes it
      _target_: probe.commands.hydra_callbacks.RunDirCheck
  run:
    dir: runs/${bench.name}/${model.name}/${now:%Y-%m-%d_%H-%M-%S}${run_label:${run.label}}   # run.label=x adds _x
  sweep:
    dir: multirun/${now:%Y-%m-%d_%H-%M-%S}
    subdir: ${probe_subdir:}   # <n>_<bench>_<model>, then the swept overrides (probe.commands.hydra_callbacks.job_subdir)
  job:
    chdir: false
  help:
    app_name: probe
    header: |
      probe run model=<name> bench=<name> [key=value ...]   (= python -m probe …; -m: a sweep over comma lists)

      Scores a benchmark with a model and writes a run directory: exact letter distributions,
      metrics with CIs, a report. Every key below is type- and range-checked before anything runs.
    footer: |
      Re-analysis: python -m probe analyze --help. Sweep report: python -m probe report --help.
      Hydra's own options: --hydra-help.
"""


def render(entry: Generated) -> str:
    """The text of one generated file."""
    note = "# Generated from the spec dataclasses by `python -m probe.commands.confgen`; edit those, not this file."
    return "\n".join([entry.header, note, *block(entry.spec, entry.values, entry.keys)]) + "\n"


def render_config() -> str:
    """`config.yaml`: the defaults list, the analysis block, run options and Hydra's directories."""
    lines = (block(AnalysisSpec, indent="  ") + ["", "run:"] + block(RunInfo, indent="  ") + [""]
             + block(RunConfig, keys=pass_through()))
    return CONFIG_HEAD.format(backend=default_backend()) + "\n".join(lines) + "\n" + BENCH_SHARD + CONFIG_TAIL


def files() -> dict[Path, str]:
    """Every generated path with its text."""
    root = package_conf_dir()
    out = {root / e.path: render(e) for e in entries()}
    out[root / "config.yaml"] = render_config()
    return out


def stale() -> list[Path]:
    """The generated files whose committed text differs from what the specs give."""
    return [p for p, text in files().items() if not p.is_file() or p.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    """`python -m probe.commands.confgen [--check]`."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if "--check" in args:
        bad = stale()
        for p in bad:
            print(f"probe.commands.confgen: {p} differs from its spec; run `python -m probe.commands.confgen`", file=sys.stderr)
        return 1 if bad else 0
    for path, text in files().items():
        make_dirs(path.parent)
        write_text(path, text)
        print(f"probe.commands.confgen: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
