"""What a run directory's launch record (`.hydra/config.yaml`, the composed config probe writes
once it holds the directory) says about the run: read where no manifest exists yet — a dry run,
which writes its prompts table and this record only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from probe.bounded import loads_yaml
from probe.errors import ProbeInputError
from probe.results.labels import read_label
from probe.results.layout import HYDRA_CONFIG


@dataclass(frozen=True)
class Launched:
    """The names a launch record gives a run (`?` where it gives none)."""

    bench: str = "?"
    model: str = "?"
    label: str | None = None


def read_launch(run_dir: Path) -> Launched:
    """The bench and model names and the label of the run in `run_dir`, from its launch record;
    `Launched()` (`?`, `?`) when the record is missing or unreadable (a directory made by an
    older probe, whose dry runs wrote none) — `probe runs` lists the run either way."""
    path = Path(run_dir) / HYDRA_CONFIG
    try:
        config = loads_yaml(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ProbeInputError):  # ProbeInputError: nested too deep
        return Launched()
    if not isinstance(config, dict):
        return Launched()
    return Launched(bench=_name(config.get("bench")), model=_name(config.get("model")),
                    label=read_label(config.get("run")))


def _name(block: object) -> str:
    name = block.get("name") if isinstance(block, dict) else None
    return str(name) if name not in (None, "") else "?"
