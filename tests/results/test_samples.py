"""`Run.samples()`: one row per prompt, from hand-made tables (exact values) and from a tiny run
(checked against its stored tables), including a run scored before the argmax was stored."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import disco_rows, run_probe, write_csv

from probe.api import load_run
from probe.benches.ccd.task import TASK as CCD_TASK
from probe.errors import ProbeInputError
from probe.report.export import _record, _relabelled
from probe.results.samples import sample_frame, variant_columns
from probe.results.schemas import ARGMAX_COLUMNS, GENERATIONS_SCHEMA

REPO_ROOT = Path(__file__).resolve().parents[2]


def _prompts() -> pa.Table:
    return pa.table({"prompt_id": [0, 1], "item_id": ["i0", "i0"], "condition": ["C0", "C1"],
                     "target": [None, "Assam"], "order": [[0, 1], [1, 0]], "groups": [["Assam", "China"],
                                                                                     ["China", "Assam"]],
                     "text": ["Q0 cue", "Q1 cue"], "token_ids": [[1, 2], [1, 3]]})


def _scores(argmax: bool = True) -> pa.Table:
    cols = {"prompt_id": [0, 1], "letter_logprobs": [[math.log(0.3), math.log(0.1)], [math.log(0.02), math.log(0.06)]],
            "letter_mass": [0.4, 0.08], "greedy_letter": ["A", "B"], "greedy_valid": [True, False]}
    if argmax:
        cols |= {"argmax_token_id": [65, 99], "argmax_token": ["A", " The"],
                 "argmax_logprob": pa.array([math.log(0.3), math.log(0.5)], pa.float32())}
    return pa.table(cols)


def test_letter_run_rows_hand_checked() -> None:
    frame = sample_frame(_prompts(), ["A", "B"], 1.0, _scores())
    assert frame["prompt_id"].tolist() == [0, 1] and frame["prompt"].tolist() == ["Q0 cue", "Q1 cue"]
    assert "token_ids" not in frame.columns
    assert frame["group_A"].tolist() == ["Assam", "China"] and frame["group_B"].tolist() == ["China", "Assam"]
    assert frame["option_A"].tolist() == [0, 1]
    # renormalised over the letters at T = 1: 0.3 / 0.4, 0.02 / 0.08
    assert np.allclose(frame["p_A"], [0.75, 0.25]) and np.allclose(frame["p_B"], [0.25, 0.75])
    assert frame["greedy_group"].tolist() == ["Assam", "Assam"]
    assert frame["greedy_valid"].tolist() == [True, False]
    assert frame["argmax_token_id"].tolist() == [65, 99] and frame["argmax_token"].tolist() == ["A", " The"]
    assert np.allclose(frame["argmax_prob"], [0.3, 0.5])
    # at T = 0.5 the letter probabilities are squared, then renormalised: 0.09 / (0.09 + 0.01)
    assert np.allclose(sample_frame(_prompts(), ["A", "B"], 0.5, _scores())["p_A"], [0.9, 0.1])


def test_runs_scored_before_the_argmax_columns_load_with_nulls() -> None:
    frame = sample_frame(_prompts(), ["A", "B"], 1.0, _scores(argmax=False))
    assert frame["argmax_token_id"].isna().all() and frame["argmax_prob"].isna().all()
    assert frame["argmax_token"].isna().all()
    assert np.allclose(frame["p_A"], [0.75, 0.25])


def test_generations_and_verdicts_join_by_prompt() -> None:
    gens = pa.Table.from_pylist([{"prompt_id": 0, "text": 'B"}', "parsed_letter": "B", "rationale": None},
                                 {"prompt_id": 1, "text": "no idea", "parsed_letter": None, "rationale": None}],
                                schema=GENERATIONS_SCHEMA)
    null = {c: None for c in CCD_TASK.judging.schema.names}
    verdicts = pa.Table.from_pylist([
        {**null, "prompt_id": 1, "task": "rationale", "dimensions": ["Power Distance"], "judge": "keyword"},
        {**null, "prompt_id": 0, "task": "rationale", "judge_error": "no JSON", "judge": "keyword"},
        {**null, "prompt_id": None, "task": "about_the_data", "matches": ["x"], "judge": "keyword"},
    ], schema=CCD_TASK.judging.schema)
    frame = sample_frame(_prompts(), ["A", "B"], 1.0, generations=gens, judgements=verdicts)
    assert frame["generation"].tolist() == ['B"}', "no idea"]
    assert frame["parsed_letter"].isna().tolist() == frame["parsed_group"].isna().tolist() == [False, True]
    assert frame["parsed_letter"][0] == "B" and frame["parsed_group"][0] == "China"
    # one column per field the task filled, and its errors; a verdict with no prompt is not a sample's
    assert [c for c in frame.columns if "." in c] == ["rationale.dimensions", "rationale.judge_error"]
    assert frame["rationale.dimensions"].isna().tolist() == [True, False]
    assert list(frame["rationale.dimensions"][1]) == ["Power Distance"]
    assert frame["rationale.judge_error"][0] == "no JSON" and pd.isna(frame["rationale.judge_error"][1])
    assert "p_A" not in frame.columns


def test_two_verdicts_of_one_task_for_one_prompt_are_refused() -> None:
    null = {c: None for c in CCD_TASK.judging.schema.names}
    twice = pa.Table.from_pylist([{**null, "prompt_id": 0, "task": "t", "framing_style": "NEUTRAL"}] * 2,
                                 schema=CCD_TASK.judging.schema)
    with pytest.raises(ProbeInputError, match="task 't' has two verdicts for prompt 0"):
        sample_frame(_prompts(), ["A", "B"], 1.0, judgements=twice)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-item DiSCo run of the tiny model (104 prompts) analysed at T = 0.5."""
    tmp = tmp_path_factory.mktemp("samples")
    csv_path = write_csv(tmp / "disco.csv", disco_rows(2))
    env = {**os.environ, "PROBE_CACHE": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=disco", f"bench.path={csv_path}",
                           f"hydra.run.dir={tmp / 'run'}", "analysis.n_boot=20", "analysis.temperature=0.5",
                           "progress=false"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "run"


def test_tiny_run_samples_match_its_tables(tiny_run: Path) -> None:
    frame = load_run(tiny_run).samples()
    prompts = pq.read_table(tiny_run / "prompts.parquet").sort_by("prompt_id").to_pylist()
    scores = pq.read_table(tiny_run / "scores.parquet").sort_by("prompt_id").to_pylist()
    assert len(frame) == 104 and frame["prompt_id"].tolist() == list(range(104))
    # item 0, rotation 0 shows its cultures in source order (conftest.disco_rows)
    first = frame.iloc[0]
    assert [first[f"group_{L}"] for L in "ABCD"] == ["Algeria", "Assam", "China", "Ethiopia"]
    assert [first[f"option_{L}"] for L in "ABCD"] == [0, 1, 2, 3]
    for k in (0, 37, 61, 103):
        row, p, s = frame.iloc[k], prompts[k], scores[k]
        assert row["prompt"] == p["text"] and row["condition"] == p["condition"] and row["item_id"] == p["item_id"]
        # p at the run's analysis temperature (0.5): softmax(lp / 0.5) over the four letters
        weights = [math.exp(2 * lp) for lp in s["letter_logprobs"]]
        assert [row[f"p_{L}"] for L in "ABCD"] == pytest.approx([w / sum(weights) for w in weights], abs=1e-9)
        assert row["greedy_letter"] == s["greedy_letter"]
        assert row["greedy_group"] == p["groups"]["ABCD".index(s["greedy_letter"])]
        assert row["argmax_token_id"] == s["argmax_token_id"] and row["argmax_token"] == s["argmax_token"]
        assert row["argmax_prob"] == pytest.approx(math.exp(s["argmax_logprob"]), rel=1e-6)
    at_one = load_run(tiny_run).samples(temperature=1.0)
    assert not np.allclose(at_one["p_A"], frame["p_A"])


def test_a_run_without_argmax_columns_still_gives_samples(tiny_run: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(tiny_run, old)
    table = pq.read_table(old / "scores.parquet")
    pq.write_table(table.drop_columns(list(ARGMAX_COLUMNS)), old / "scores.parquet")
    before, after = load_run(tiny_run).samples(), load_run(old).samples()
    assert after["argmax_token_id"].isna().all() and after["argmax_prob"].isna().all()
    kept = [c for c in before.columns if not c.startswith("argmax_")]
    assert after[kept].equals(before[kept])


VARIANTS = [{"index": 0, "name": "protocol", "levels": {"labels": "protocol"}, "labels": ["A", "B"]},
            {"index": 1, "name": "labels=digits", "levels": {"labels": "digits"}, "labels": ["1", "2"]}]


def test_a_factor_runs_rows_carry_their_variant_and_the_labels_they_showed() -> None:
    prompts = _prompts().append_column("variant", pa.array([0, 1], pa.int64()))
    frame = variant_columns(sample_frame(prompts, ["A", "B"], 1.0, _scores()), VARIANTS, ["A", "B"])
    assert frame["variant_name"].tolist() == ["protocol", "labels=digits"]
    assert frame["variant_levels"].tolist() == [{"labels": "protocol"}, {"labels": "digits"}]
    assert frame[["label_A", "label_B"]].values.tolist() == [["A", "B"], ["1", "2"]]
    with pytest.raises(ProbeInputError, match=r"variant\(s\) \[1\] are not in the manifest"):
        variant_columns(frame, VARIANTS[:1], ["A", "B"])
    plain = sample_frame(_prompts(), ["A", "B"], 1.0, _scores())
    assert variant_columns(plain, VARIANTS, ["A", "B"]) is plain  # no factors: unchanged


def test_an_export_record_is_keyed_by_the_labels_its_prompt_showed() -> None:
    row = {"prompt_id": 1, "variant": 1, "variant_name": "labels=digits", "variant_levels": {"labels": "digits"},
           "label_A": "1", "label_B": "2", "group_A": "China", "group_B": "Assam", "option_A": 1, "option_B": 0,
           "p_A": 0.25, "p_B": 0.75, "greedy_letter": "B", "greedy_group": "Assam", "greedy_valid": True}
    record = _relabelled(_record(row, {1: [0.4, 0.6]}))
    assert record["variant"] == {"index": 1, "name": "labels=digits", "levels": {"labels": "digits"}}
    assert record["probabilities"] == {"1": 0.25, "2": 0.75}
    assert record["options"] == {"1": {"group": "China", "option": 1}, "2": {"group": "Assam", "option": 0}}
    assert record["readings"]["greedy"] == {"letter": "2", "group": "Assam", "valid": True}
    assert record["readings"]["expected"] == {"letter": "2", "group": "Assam"}
    assert record["readings"]["debiased"]["probabilities"] == {"1": 0.4, "2": 0.6}
    assert not any(k.startswith(("label_", "variant_")) for k in record)
