"""Hydra callbacks of the entry point (`hydra.callbacks` in `conf/config.yaml`): checks that
must run before Hydra itself acts, where `probe.__main__` cannot catch what fails."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from probe.errors import ProbeInputError, os_errors


class RunDirCheck(Callback):
    """Creates the run (or sweep) directory before Hydra does, so a path the file system refuses
    — a name longer than it allows, a parent that is a file, no write permission — stops with
    one line and exit status 2 instead of Hydra's traceback."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        create_dir(str(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        create_dir(str(config.hydra.sweep.dir), "hydra.sweep.dir")


def create_dir(path: str, key: str) -> None:
    """`mkdir -p path`, or print the one-line refusal and exit 2."""
    try:
        with os_errors(f"{key}={path}", "choose a shorter path, or one where you can write"):
            Path(path).mkdir(parents=True, exist_ok=True)
    except ProbeInputError as e:  # Hydra's logging is not set up yet: stderr only
        print(f"probe: error: {e}", file=sys.stderr)
        sys.exit(2)
