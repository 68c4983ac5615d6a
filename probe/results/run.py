"""Python API over a run directory, for follow-up studies. No model needed.

    run = probe.load_run("runs/demo/smollm2-135m/2026-11-30_12-00-00")
    run.prompts.to_pandas()                      # one row per prompt
    p = run.choice_probs()                       # [prompt, letter], rows in prompt-id order
    run.group_distribution(run.mask(condition="C0"))   # {group: expected share}
    run.group_distribution(run.mask(condition="C0"), reading="debiased")   # letter prior removed
    probe.recompute_metrics(run, run.mask(condition="C0"))   # any metric on a subset
    run.samples()                                # pandas, one row per prompt: text, probabilities, verdicts
    lens = run.lens()                            # [prompt, layer, letter] (if stored)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa

from probe.errors import ProbeInputError
from probe.probs import choice_probs, exposure_shares, greedy_onehot, group_sums
from probe.results.generations import read_generation_table
from probe.results.io import open_tensors, read_json_object
from probe.results.layout import (
    ACTIVATIONS,
    GENERATIONS,
    JUDGEMENTS,
    LENS,
    MANIFEST,
    METRICS,
    PROMPTS,
    RUN_KEY,
    SCORE_TENSORS,
    SCORES,
)
from probe.results.integrity import check_tables, read_parquet
from probe.results.manifest import Manifest
from probe.results.scores import ScoreTable, read_table

if TYPE_CHECKING:
    import pandas as pd

ChoiceReading = Literal["expected", "greedy", "debiased"]
"""How a letter run's choices are read: probability-weighted, argmax, letter prior removed (not
`probe.backends.reading.Reading`, which names how answers are scored)."""
READINGS: tuple[str, ...] = ("expected", "greedy", "debiased")

Debias = Callable[["Run", float], "np.ndarray | None"]
"""`(run, temperature) → [prompt, letter]` debiased distribution (None: the design cannot estimate it)."""


@dataclass
class Run:
    """A run directory: its manifest and `metrics.json`, read when it is opened, and its tables
    and tensors, read on first use. Tables are pyarrow (`.to_pandas()` for pandas); every
    per-prompt array is in `prompt_id` order (row i = prompt i). The results layer knows no
    bench: a run's metrics are recomputed with its bench's task (`probe.recompute_metrics`)."""

    path: Path
    manifest: Manifest
    """How the run was made (`probe.results.manifest`); reads like the stored JSON object too."""
    metrics: dict[str, Any] | None
    """`metrics.json` (None: not written yet)."""
    debias: Debias | None = field(default=None, kw_only=True, repr=False, compare=False)
    """The bench's way of removing the letter prior (`Task` scoring's `debiased`); None: opened without
    its bench, so `reading="debiased"` is refused."""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def prompts(self) -> pa.Table:
        """`prompts.parquet`, one row per prompt."""
        table = self._table(PROMPTS)
        if table is None:
            raise ProbeInputError(f"{self.path}: no {PROMPTS}")
        return table

    @property
    def scores(self) -> pa.Table | None:
        """`scores.parquet` (None: a generation run)."""
        return self._table(SCORES)

    @property
    def generations(self) -> pa.Table | None:
        """`generations.parquet` (None: a letter run)."""
        return self._table(GENERATIONS)

    @property
    def judgements(self) -> pa.Table | None:
        """`judgements.parquet` in its stored row order (None: nothing was judged)."""
        return self._table(JUDGEMENTS, by_prompt=False)

    def tables(self) -> Run:
        """This run with every stored table read now (they are otherwise read on first use), so a
        missing or damaged one fails here."""
        if self._table(PROMPTS) is None:
            raise ProbeInputError(f"{self.path}: no {PROMPTS}")
        for name, by_prompt in ((SCORES, True), (GENERATIONS, True), (JUDGEMENTS, False)):
            self._table(name, by_prompt)
        return self

    def _table(self, name: str, by_prompt: bool = True) -> pa.Table | None:
        if name not in self._cache:
            path = self.path / name
            table = read_parquet(self.path, name) if path.is_file() else None
            self._cache[name] = table.sort_by("prompt_id") if table is not None and by_prompt else table
        return self._cache[name]

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
                                      "generations and judgements tables (probe.recompute_metrics(run) for metrics)")
        return self._cache["table"]

    def letter_logprobs(self) -> np.ndarray:
        """`[prompt, letter]` float32 full-vocabulary letter log-probs (scores.safetensors)."""
        return self._tensor(SCORE_TENSORS, "letter_logprobs")

    def lens(self) -> np.ndarray:
        """`[prompt, layer, letter]` float32 letter log-probs through the logit lens."""
        return self._tensor(LENS, "lens")

    def activations(self, layers: Sequence[int] | None = None) -> np.ndarray:
        """`[prompt, layer, d_model]` residual stream at the answer position, for the captured
        `layers` (decoder layer indices; None = all captured)."""
        captured = self.captured_layers()
        full = self._tensor(ACTIVATIONS, "activations")
        if layers is None:
            return full
        missing = [layer for layer in layers if layer not in captured]
        if missing:
            raise ProbeInputError(f"{self.path}: layers {missing} were not captured (captured: {captured})")
        return full[:, [captured.index(layer) for layer in layers]]

    def captured_layers(self) -> list[int]:
        return self._tensor(ACTIVATIONS, "layers").tolist()

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
        runs: every verdict as `<task>.<field>` (`probe.results.samples`); a factor run: its
        variant's `variant_name`, `variant_levels` and the label shown at each letter (`label_A`, …). A `letters+text` run
        adds the text reading's `text_p_A`, … and `text_greedy_letter`; a `text` run's `p_A`, …
        are its text reading's (its letter columns are null)."""
        if temperature is None:
            temperature = self.manifest.temperature
        if not temperature > 0:
            raise ProbeInputError(f"samples: temperature must be > 0, got {temperature}")
        from probe.results.samples import sample_frame, variant_columns  # pandas loads on first use

        letters = list(self.manifest.letters)
        frame = sample_frame(self.prompts, letters, temperature, self.scores, self.generations, self.judgements)
        return variant_columns(frame, self.manifest.raw.get("variants") or [], letters)

    def choice_probs(self, temperature: float = 1.0, greedy: bool = False,
                     reading: ChoiceReading | None = None) -> np.ndarray:
        """`[prompt, letter]` choice distribution over the letters (docs/concepts/exact-distributions.md)
        in one `reading`: `expected` (softmax at `temperature`), `greedy` (one-hot argmax) or
        `debiased` (the letter prior removed, docs/concepts/letter-prior.md); `greedy=True` is
        `reading="greedy"`."""
        reading = reading or ("greedy" if greedy else "expected")
        lp = self.table().logprobs
        if reading == "expected":
            return choice_probs(lp, temperature)
        if reading == "greedy":
            return greedy_onehot(lp)
        if reading == "debiased":
            return self._debiased_probs(temperature)
        raise ProbeInputError(f"reading: expected one of {list(READINGS)}, got {reading!r}")

    def _debiased_probs(self, temperature: float) -> np.ndarray:
        """The bench's debiased reading (`debias`), cached per temperature; refused without a bench,
        or where its design cannot estimate the prior."""
        if self.debias is None:  # the results layer knows no bench: the debiased reading is the bench's
            raise ProbeInputError(f"{self.path}: the debiased reading needs the run's bench: open the run with "
                                  "probe.load_run")
        key = f"debiased:{temperature}"
        if key not in self._cache:
            self._cache[key] = self.debias(self, temperature)
        if self._cache[key] is None:
            raise ProbeInputError(f"{self.path}: no debiased reading: the letter prior of some condition cannot be "
                                  "estimated (metrics.json's letter_prior_estimator says why)")
        return self._cache[key]

    def group_distribution(self, mask: np.ndarray | None = None, temperature: float = 1.0,
                           greedy: bool = False, reading: ChoiceReading | None = None) -> dict[str, float]:
        """Exposure-normalised share of each group (culture, cluster) over the masked prompts:
        `(sel(c)/app(c)) / Σ_c' sel(c')/app(c')` — DiSCo's CSD on any subset — in one `reading`
        (`expected`, `greedy`, `debiased`; see `choice_probs`). The debiased distribution is
        estimated over the whole run (complete rotation groups), then masked."""
        table = self.table()
        rows = np.ones(len(table.prompt_id), bool) if mask is None else _align(mask, table)
        probs = self.choice_probs(temperature, greedy, reading)[rows]
        groups = table.groups[rows]
        names = sorted({str(g) for g in groups.ravel()})
        return dict(zip(names, map(float, exposure_shares(*group_sums(probs, groups, names)))))


def _align(mask: np.ndarray, table: ScoreTable) -> np.ndarray:
    """A `[prompt]` mask restricted to the rows of `table` (generation runs drop invalid rows)."""
    mask = np.asarray(mask, dtype=bool)
    return mask[table.prompt_id] if len(mask) != len(table.prompt_id) else mask


def load_run(path: str | Path) -> Run:
    """Open a run directory of any bench (letter, generation or open-answer mode): a whole run,
    finished or not, that has its prompts (a shard is refused: merge the shards first)."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        raise ProbeInputError(not_a_run(path))
    manifest = _manifest(path)
    shard = manifest.shard
    if shard is not None:
        raise ProbeInputError(f"{path} is shard {shard.index}/{shard.count} of a run, not a run: merge the "
                              "shards first (python -m probe merge --out <dir> <shard dirs…>)")
    if not (path / PROMPTS).is_file():
        raise ProbeInputError(f"{path}: no {PROMPTS}")
    metrics = read_json_object(path / METRICS) if (path / METRICS).is_file() else None
    check_tables(path, manifest)
    return Run(path=path, manifest=manifest, metrics=metrics)


def finished_run(path: str | Path) -> Run:
    """A finished run's manifest and `metrics.json`, each checked to be a JSON object, and its
    tables' files (`probe.results.integrity.check_tables`): a one-line `ProbeInputError` naming
    the run and the file otherwise; its tables are read on first use."""
    path = Path(path)
    manifest = _manifest(path)
    metrics = read_json_object(path / METRICS)
    check_tables(path, manifest)
    return Run(path=path, manifest=manifest, metrics=metrics)


def checked_manifest(path: str | Path) -> Manifest:
    """The manifest of the run in `path`, its tables' files checked (`check_tables`): a one-line
    `ProbeInputError` naming the run and the file when one is damaged."""
    manifest = _manifest(Path(path))
    check_tables(Path(path), manifest)
    return manifest


def _manifest(path: Path) -> Manifest:
    """The run's manifest; one whose blocks have the wrong shape is a one-line error naming it."""
    raw = read_json_object(path / MANIFEST)
    try:
        return Manifest.from_json(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ProbeInputError(f"{path / MANIFEST}: not a probe manifest ({type(e).__name__}: {e})") from None


def not_a_run(path: Path) -> str:
    """Why `path`, which has no manifest, cannot be read as a run: an unfinished run (its key is
    there: killed, or still running, before its answers were complete) or no run at all."""
    if (path / RUN_KEY).is_file():
        return (f"{path}: an unfinished probe run (no {MANIFEST} yet: it was stopped, or is still running, before its "
                "answers were complete); rerun its command into this directory to finish it")
    return f"{path}: no {MANIFEST}; not a probe run directory"
