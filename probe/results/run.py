"""Python API over a run directory, for follow-up studies. No model needed.

    run = probe.load_run("runs/demo/smollm2-135m/2026-11-30_12-00-00")
    run.prompts.to_pandas()                      # one row per prompt
    p = run.choice_probs()                       # [prompt, letter], rows in prompt-id order
    run.group_distribution(run.mask(condition="C0"))   # {culture: expected share}
    run.recompute_metrics(run.mask(condition="C0"))    # any metric on a subset
    run.samples()                                # pandas, one row per prompt: text, probabilities, verdicts
    lens = run.lens()                            # [prompt, layer, letter] (if stored)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from probe.errors import ProbeInputError
from probe.probs import choice_probs, exposure_shares, greedy_onehot, group_sums
from probe.results.generations import read_generation_table
from probe.results.io import open_tensors
from probe.results.manifest import Manifest, read_manifest
from probe.results.scores import ScoreTable, read_table

if TYPE_CHECKING:
    import pandas as pd

MetricsFn = Callable[["Run", "np.ndarray | None", "Mapping[str, Any] | None"], dict[str, Any]]
"""`(run, prompt mask, analysis overrides) → metric tree`: the bench's metrics, attached by
`probe.load_run` (the results layer knows no bench)."""


@dataclass
class Run:
    """A loaded run directory. Tables are pyarrow (`.to_pandas()` for pandas); tensors load
    lazily on first use; every per-prompt array is in `prompt_id` order (row i = prompt i)."""

    path: Path
    manifest: Manifest
    """How the run was made (`probe.results.manifest`); reads like the stored JSON object too."""
    metrics: dict[str, Any] | None
    prompts: pa.Table
    scores: pa.Table | None
    generations: pa.Table | None
    judgements: pa.Table | None
    metrics_fn: MetricsFn | None = field(default=None, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def bench_kind(self) -> str:
        return str(self.manifest.bench.kind)

    @property
    def letters(self) -> list[str]:
        return list(self.manifest.letters)

    def table(self) -> ScoreTable:
        """The joined prompts + scores arrays the metrics use (generation runs: one-hot of the
        parsed letter, invalid rows removed)."""
        if "table" not in self._cache:
            if self.scores is not None:
                self._cache["table"] = read_table(self.path)
            elif self.generations is not None and "parsed_letter" in self.generations.column_names:
                self._cache["table"] = read_generation_table(self.path, self.letters)[0]
            else:
                raise ProbeInputError(f"{self.path}: this run has open answers, not letter choices; use its "
                                      "generations and judgements tables (run.recompute_metrics() for metrics)")
        return self._cache["table"]

    def letter_logprobs(self) -> np.ndarray:
        """`[prompt, letter]` float32 full-vocabulary letter log-probs (scores.safetensors)."""
        return self._tensor("scores.safetensors", "letter_logprobs")

    def lens(self) -> np.ndarray:
        """`[prompt, layer, letter]` float32 letter log-probs through the logit lens."""
        return self._tensor("lens.safetensors", "lens")

    def activations(self, layers: Sequence[int] | None = None) -> np.ndarray:
        """`[prompt, layer, d_model]` residual stream at the answer position, for the captured
        `layers` (decoder layer indices; None = all captured)."""
        captured = self.captured_layers()
        full = self._tensor("activations.safetensors", "activations")
        if layers is None:
            return full
        missing = [layer for layer in layers if layer not in captured]
        if missing:
            raise ProbeInputError(f"{self.path}: layers {missing} were not captured (captured: {captured})")
        return full[:, [captured.index(layer) for layer in layers]]

    def captured_layers(self) -> list[int]:
        return self._tensor("activations.safetensors", "layers").tolist()

    def _tensor(self, file: str, name: str) -> np.ndarray:
        key = f"{file}:{name}"
        if key not in self._cache:
            path = self.path / file
            if not path.is_file():
                raise ProbeInputError(f"{self.path}: no {file} (was it requested for this run?)")
            with open_tensors(path) as f:
                ids = f.get_tensor("prompt_id")
                if not np.array_equal(ids, np.arange(len(ids))) or len(ids) != self.prompts.num_rows:
                    raise ProbeInputError(f"{path}: rows are not prompt ids 0..{self.prompts.num_rows - 1}")
                self._cache[key] = f.get_tensor(name)
        return self._cache[key]

    def patching(self) -> tuple[np.ndarray, np.ndarray, pa.Table]:
        """Activation patching (`intervention=patch`): `logprobs [pair, layer, letter]`, the
        patched `layers`, and the pairs table (item, rotation, target, source and destination
        prompt ids), checked (`probe.results.patch_tables`)."""
        from probe.results.patch_tables import load_patching

        return load_patching(self.path)

    def mask(self, **equal: Any) -> np.ndarray:
        """Boolean `[prompt]` mask of prompts whose columns equal the given values, e.g.
        `mask(condition="C0")`, `mask(category="food", condition="C3", ctx_rotation=0)`."""
        out = np.ones(self.prompts.num_rows, dtype=bool)
        for column, value in equal.items():
            if column not in self.prompts.column_names:
                raise ProbeInputError(f"no prompts column {column!r}; columns: {self.prompts.column_names}")
            out &= np.array([v == value for v in self.prompts.column(column).to_pylist()])
        return out

    def samples(self, temperature: float | None = None) -> pd.DataFrame:
        """One row per prompt (prompt-id order): ids, condition and the other prompt columns,
        the rendered prompt (`prompt`), the group and source option at each letter
        (`group_A`, `option_A`, …), and what the run stored about it — letter runs: `p_A`, … at
        `temperature` (default: the run's analysis temperature), `letter_mass`, the greedy pick
        (`greedy_letter`, `greedy_group`, `greedy_valid`) and the full-vocabulary argmax token
        (`argmax_token_id`, `argmax_token`, `argmax_prob`; null / NaN in runs scored before probe
        stored it); generation runs: `generation` and its parsed columns (`parsed_group`); judged
        runs: every verdict as `<task>.<field>` (`probe.results.samples`). A `letters+text` run
        adds the text reading's `text_p_A`, … and `text_greedy_letter`; a `text` run's `p_A`, …
        are its text reading's (its letter columns are null)."""
        if temperature is None:
            temperature = self.manifest.temperature
        if not temperature > 0:
            raise ProbeInputError(f"samples: temperature must be > 0, got {temperature}")
        from probe.results.samples import sample_frame  # pandas loads on first use: `import probe` stays light

        return sample_frame(self.prompts, list(self.manifest.letters), temperature, self.scores,
                            self.generations, self.judgements)

    def choice_probs(self, temperature: float = 1.0, greedy: bool = False) -> np.ndarray:
        """`[prompt, letter]` choice distribution over the letters (docs/concepts/exact-distributions.md)."""
        lp = self.table().logprobs
        return greedy_onehot(lp) if greedy else choice_probs(lp, temperature)

    def group_distribution(self, mask: np.ndarray | None = None, temperature: float = 1.0,
                           greedy: bool = False) -> dict[str, float]:
        """Exposure-normalised share of each group (culture, cluster) over the masked prompts:
        `(sel(c)/app(c)) / Σ_c' sel(c')/app(c')` — DiSCo's CSD on any subset."""
        table = self.table()
        rows = np.ones(len(table.prompt_id), bool) if mask is None else _align(mask, table)
        probs = self.choice_probs(temperature, greedy)[rows]
        groups = table.groups[rows]
        names = sorted({str(g) for g in groups.ravel()})
        return dict(zip(names, map(float, exposure_shares(*group_sums(probs, groups, names)))))

    def recompute_metrics(self, mask: np.ndarray | None = None, analysis: Mapping[str, Any] | None = None) -> dict:
        """The bench's metric tree (`expected`, `greedy`, `ci95`) on the masked prompts only,
        with the run's analysis options updated by `analysis`."""
        if self.metrics_fn is None:
            raise ProbeInputError(f"{self.path}: load the run with probe.load_run to recompute its metrics")
        return self.metrics_fn(self, mask, analysis)


def _align(mask: np.ndarray, table: ScoreTable) -> np.ndarray:
    """A `[prompt]` mask restricted to the rows of `table` (generation runs drop invalid rows)."""
    mask = np.asarray(mask, dtype=bool)
    return mask[table.prompt_id] if len(mask) != len(table.prompt_id) else mask


def load_run(path: str | Path, metrics_fn: MetricsFn | None = None) -> Run:
    """Load a run directory of any bench (letter or generation mode); `metrics_fn` recomputes its
    metrics (`probe.load_run` supplies the bench's)."""
    path = Path(path)
    if not (path / "manifest.json").is_file():
        raise ProbeInputError(f"{path}: no manifest.json; not a probe run directory")

    def table(name: str) -> pa.Table | None:
        return pq.read_table(path / name).sort_by("prompt_id") if (path / name).is_file() else None

    manifest = read_manifest(path)
    shard = manifest.shard
    if shard is not None:
        raise ProbeInputError(f"{path} is shard {shard.index}/{shard.count} of a run, not a run: merge the "
                              "shards first (python -m probe merge --out <dir> <shard dirs…>)")
    prompts = table("prompts.parquet")
    if prompts is None:
        raise ProbeInputError(f"{path}: no prompts.parquet")
    metrics_path = path / "metrics.json"
    return Run(path=path, manifest=manifest, metrics_fn=metrics_fn,
               metrics=json.loads(metrics_path.read_text()) if metrics_path.is_file() else None,
               prompts=prompts, scores=table("scores.parquet"), generations=table("generations.parquet"),
               judgements=pq.read_table(path / "judgements.parquet") if (path / "judgements.parquet").is_file()
               else None)
