"""One row per prompt: a run's prompts, letter probabilities, generations and verdicts joined
(`Run.samples()`), for auditing single answers rather than aggregates.

Generic over benchmarks: the columns come from the stored tables, never from the bench's name.
A forced-choice run adds, per letter L, `group_L` (the group shown at L: a culture, a cluster)
and `option_L` (its source option index); a letter run adds `p_L` (the choice probability at the
analysis temperature), the greedy pick and the full-vocabulary argmax token; a generation run
adds `generation` (the raw text) and its parsed columns; a judged run adds each verdict as
`<task>.<field>`. A run with prompt factors adds its variant's `variant_name` and
`variant_levels` (`{factor: level}`) and, per letter L, `label_L`: the label the prompt showed
at position L (`1` where variant `labels=digits` shows 1 2 3 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from probe.errors import ProbeInputError
from probe.probs import choice_probs
from probe.results.layout import GENERATIONS, SCORES
from probe.results.scores import argmax_columns
from probe.results.text_parts import letter_reading_absent

IDENTIFYING = ("prompt_id", "task", "template", "language", "judge")
"""`judgements.parquet` columns that say which verdict a row is, not what it found."""


def letter_column(prefix: str, letter: str) -> str:
    """`group_A`, `p_A`, …: the per-letter columns of the samples table."""
    return f"{prefix}_{letter}"


def sample_frame(prompts: pa.Table, letters: Sequence[str], temperature: float, scores: pa.Table | None = None,
                 generations: pa.Table | None = None, judgements: pa.Table | None = None) -> pd.DataFrame:
    """The samples table of one run's stored tables (each sorted by `prompt_id`): one row per
    prompt in prompt-id order, the prompt's text as `prompt`.

    `p_L = softmax(lp / T)` over the letters the prompt shows at `temperature` (0 at a letter
    whose `order` is −1); `argmax_prob = exp(argmax_logprob)`
    is the full-vocabulary probability of the argmax token, NaN (and `argmax_token_id` /
    `argmax_token` None) for runs scored before probe stored it."""
    frame = _prompt_columns(prompts, letters)
    if scores is not None:
        frame = frame.join(_score_columns(scores, letters, temperature, frame))
    if generations is not None:
        frame = frame.join(_generation_columns(generations, letters, frame))
    if judgements is not None:
        frame = frame.join(_verdict_columns(judgements, frame.index))
    return frame.reset_index()


def _prompt_columns(prompts: pa.Table, letters: Sequence[str]) -> pd.DataFrame:
    keep = [c for c in prompts.column_names if c not in ("token_ids", "groups", "order", "text_prompt_token_ids")]
    frame = prompts.select(keep).to_pandas().rename(columns={"text": "prompt"}).set_index("prompt_id")
    for name, prefix in (("groups", "group"), ("order", "option")):
        if name in prompts.column_names and letters:
            values = prompts.column(name).to_pylist()
            for k, letter in enumerate(letters):
                frame[letter_column(prefix, letter)] = [v[k] if v is not None and k < len(v) else None
                                                        for v in values]
    if "groups" in prompts.column_names and "order" in prompts.column_names:
        for letter in letters:  # a letter the prompt does not show (`order` −1) shows no group
            unshown = frame[letter_column("option", letter)] == -1
            if unshown.any():
                frame.loc[unshown, letter_column("group", letter)] = None
    return frame


def _score_columns(scores: pa.Table, letters: Sequence[str], temperature: float,
                   frame: pd.DataFrame) -> pd.DataFrame:
    ids = scores.column("prompt_id").to_numpy()
    _same_prompts(ids, frame.index, SCORES)
    # a text-mode run has no letter reading: its choice distribution is over the option texts
    reading = "text_logprobs" if letter_reading_absent(scores) else "letter_logprobs"
    lp = np.asarray(scores.column(reading).to_pylist(), dtype=np.float64).reshape(len(ids), len(letters))
    lp = np.where(_shown(frame, letters), lp, -np.inf)
    probs = choice_probs(lp, temperature) if len(ids) else np.zeros_like(lp)
    out = pd.DataFrame({letter_column("p", L): probs[:, k] for k, L in enumerate(letters)}, index=frame.index)
    out["letter_mass"] = scores.column("letter_mass").to_numpy(zero_copy_only=False)
    out["greedy_letter"] = scores.column("greedy_letter").to_pylist()
    if reading == "letter_logprobs" and len(ids):  # the greedy pick among the letters the prompt shows
        out["greedy_letter"] = [letters[i] for i in lp.argmax(axis=1)]
    out["greedy_group"] = _group_at(frame, out["greedy_letter"])
    out["greedy_valid"] = scores.column("greedy_valid").to_pylist()
    argmax = argmax_columns(scores)
    out["argmax_token_id"] = pd.array(argmax.column("argmax_token_id").to_pylist(), dtype="Int64")
    out["argmax_token"] = argmax.column("argmax_token").to_pylist()
    logprob = argmax.column("argmax_logprob").to_numpy(zero_copy_only=False).astype(np.float64)
    out["argmax_prob"] = np.exp(logprob)
    if reading == "letter_logprobs" and "text_logprobs" in scores.column_names:  # letters+text: both readings
        text = np.asarray(scores.column("text_logprobs").to_pylist(), dtype=np.float64).reshape(len(ids), len(letters))
        tp = choice_probs(text, temperature) if len(ids) else np.zeros_like(text)
        for k, L in enumerate(letters):
            out[letter_column("text_p", L)] = tp[:, k]
        out["text_greedy_letter"] = [letters[i] for i in text.argmax(axis=1)] if len(ids) else []
    return out


def _shown(frame: pd.DataFrame, letters: Sequence[str]) -> np.ndarray:
    """`[prompt, letter]` whether the prompt shows an option at the letter: not where its `order` is
    −1 (a bench whose items differ in K), which then gets no probability, as in its metrics."""
    shown = np.ones((len(frame), len(letters)), dtype=bool)
    for k, letter in enumerate(letters):
        column = letter_column("option", letter)
        if column in frame.columns:
            shown[:, k] = frame[column].to_numpy() != -1
    return shown


def _generation_columns(generations: pa.Table, letters: Sequence[str], frame: pd.DataFrame) -> pd.DataFrame:
    ids = generations.column("prompt_id").to_numpy()
    _same_prompts(ids, frame.index, GENERATIONS)
    out = generations.to_pandas().rename(columns={"text": "generation"}).set_index("prompt_id")
    out.index = frame.index
    if "parsed_letter" in out.columns and letters:
        out["parsed_group"] = _group_at(frame, out["parsed_letter"])
    return out


def _group_at(frame: pd.DataFrame, letter: pd.Series) -> list[Any]:
    """The group shown at each row's chosen letter (None without groups or a letter)."""
    return [frame.at[pid, letter_column("group", L)] if isinstance(L, str) and letter_column("group", L)
            in frame.columns else None for pid, L in zip(frame.index, letter)]


def _verdict_columns(judgements: pa.Table, index: pd.Index) -> pd.DataFrame:
    """`<task>.<field>` for every field a judge task filled in some verdict, and
    `<task>.judge_error`; verdicts about the data rather than a prompt (no `prompt_id`) are not
    a sample's and stay out."""
    rows = [r for r in judgements.to_pylist() if r["prompt_id"] is not None]
    out = pd.DataFrame(index=index)
    for task in sorted({r["task"] for r in rows}):
        mine = [r for r in rows if r["task"] == task]
        by_prompt = _one_per_prompt(mine, task)
        fields = [c for c in judgements.column_names if c not in IDENTIFYING
                  and (c == "judge_error" or any(r[c] is not None for r in mine))]
        for c in fields:
            out[f"{task}.{c}"] = [by_prompt[pid][c] if pid in by_prompt else None for pid in index]
    return out


def _one_per_prompt(rows: Sequence[Mapping[str, Any]], task: str) -> dict[int, Mapping[str, Any]]:
    by_prompt: dict[int, Mapping[str, Any]] = {}
    for r in rows:
        if r["prompt_id"] in by_prompt:
            raise ProbeInputError(f"judgements.parquet: task {task!r} has two verdicts for prompt {r['prompt_id']}; "
                                  "expected one per prompt")
        by_prompt[int(r["prompt_id"])] = r
    return by_prompt


def _same_prompts(ids: np.ndarray, index: pd.Index, name: str) -> None:
    if not np.array_equal(ids, index.to_numpy()):
        raise ProbeInputError(f"{name} and prompts.parquet hold different prompt ids ({len(ids)} vs {len(index)} "
                              "rows); the run directory is damaged")


def variant_columns(frame: pd.DataFrame, variants: Sequence[Mapping[str, Any]], letters: Sequence[str]) -> pd.DataFrame:
    """`frame` with `variant_name`, `variant_levels` and `label_L` per letter, from the manifest's
    `variants` records (`index`, `name`, `levels`, `labels`); unchanged for a run without the
    `variant` column (no prompt factors)."""
    if "variant" not in frame.columns or not variants:
        return frame
    by_index = {int(v["index"]): v for v in variants}
    missing = sorted({int(i) for i in frame["variant"]} - set(by_index))
    if missing:
        raise ProbeInputError(f"prompts.parquet: variant(s) {missing[:5]} are not in the manifest's `variants` "
                              f"(it records {sorted(by_index)[:5]}…); the run directory is damaged")
    records = [by_index[int(i)] for i in frame["variant"]]
    out = frame.copy()
    out["variant_name"] = [str(v["name"]) for v in records]
    out["variant_levels"] = [dict(v.get("levels") or {}) for v in records]
    for k, letter in enumerate(letters):
        labels = [list(v.get("labels") or letters) for v in records]
        out[letter_column("label", letter)] = [ls[k] if k < len(ls) else None for ls in labels]
    return out
