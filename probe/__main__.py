"""Entry point: `python -m probe model=<name> bench=<name> [overrides]` (Hydra, configs in conf/).

Hydra and DictConfig stop here: the composed config becomes plain typed objects and
`probe.run.run` does the work.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from probe.config import build
from probe.errors import ProbeInputError
from probe.models import ModelSpec
from probe.run import RunConfig, run

log = logging.getLogger("probe")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    try:
        out = run(RunConfig(
            model=build(ModelSpec, values["model"], "model"),
            bench=values["bench"],
            backend=values["backend"],
            analysis=values["analysis"],
            judge=values["judge"],
            judge_model=_judge_model(values["judge"]),
            out_dir=Path(HydraConfig.get().runtime.output_dir),
            progress=bool(values.get("progress", True)),
            shard_size=int(values.get("shard_size", 4096)),
        ))
    except ProbeInputError as e:
        log.error("%s", e)
        print(f"probe: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"probe: run written to {out}")


def _judge_model(judge: dict) -> ModelSpec | None:
    """`judge.model` names a config in conf/model (loaded here, where the config tree lives)."""
    name = judge.get("model")
    if not name or judge.get("name") != "llm":  # the HTTP judge's `model` is the API's model name
        return None
    path = Path(__file__).resolve().parent.parent / "conf" / "model" / f"{name}.yaml"
    if not path.is_file():
        raise ProbeInputError(f"judge.model: no model config {name!r} in conf/model")
    values = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert isinstance(values, dict)
    return build(ModelSpec, values, f"judge.model ({name})")


if __name__ == "__main__":
    main()
