"""The answer-text reading's metrics (issue 25): the `text` and `text_norm` trees through the
bench's own code, and the letter-vs-text agreement audit on hand-computed tables, its
identities (text = letters), a letter-locked model, its bootstrap against an explicit resample,
and runs without a text reading left exactly as they were."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import spearmanr

from probe.benches.ccd.data import CLUSTERS
from probe.benches.ccd.metrics import compute as ccd_compute
from probe.benches.disco.data import DiscoSpec, build_prompts
from probe.benches.disco.metrics import DiscoAnalysis, compute
from probe.benches.forced import ROTATION_DESIGN, letter_metrics, letter_report
from probe.benches.forced_metrics import letter_blocks
from probe.benches.registry import get_task
from probe.commands.compare import main as compare_main
from probe.errors import ProbeInputError
from probe.metrics.text_agreement import (
    Reading,
    agreement,
    average_ranks,
    choice_agreement,
    evaluate,
    pair_sums,
    per_byte,
    spearman,
)
from probe.metrics.core import AnalysisOptions, replicates_of
from probe.metrics.letters import LetterOptions, analyse
from probe.probs import choice_probs
from probe.report.sweep import bench_table, load_entries
from probe.results.manifest import Manifest
from probe.results.schemas import GENERATIONS_SCHEMA
from probe.results.scores import ScoreTable
from probe.types import Item, Option
from probe.viz.text_agreement import agreement_section

from conftest import design_columns, run_probe

L = np.log


def _table(lp: np.ndarray, text: np.ndarray | None, orders: list[list[int]], items: list[str],
           names: list[str]) -> ScoreTable:
    n = len(lp)
    return ScoreTable(prompt_id=np.arange(n), item_id=np.array(items, object),
                      design={"condition": np.array(["C0"] * n, object), "target": np.array([None] * n, object),
                              "rotation": np.zeros(n, np.int64), "ctx_rotation": -np.ones(n, np.int64)},
                      groups=np.array([[names[o] for o in order] for order in orders], object),
                      logprobs=np.asarray(lp, np.float64), greedy_valid=np.ones(n, bool),
                      order=np.array(orders, np.int64), text_logprobs=text,
                      text_n_bytes=None if text is None else np.full(text.shape, 4))


def _hand() -> ScoreTable:
    """Two items, each under both orderings of two options X (option 0) and Y (option 1)."""
    lp = np.array([L([.8, .2]), L([.6, .4]), L([.7, .3]), L([.9, .1])])
    text = np.array([[-2.0, -1.0], [-1.0, -2.0], [-1.0, -3.0], [-3.0, -1.0]])
    return _table(lp, text, [[0, 1], [1, 0], [0, 1], [1, 0]], ["i1", "i1", "i2", "i2"], ["X", "Y"])


def test_a_hand_computed_audit() -> None:
    # picks (letters, text): i1 (X, Y), (Y, Y); i2 (X, X), (Y, X) → two of four agree; with K = 2
    # each prompt's rank correlation is +1 (same pick) or −1, mean 0.
    table = _hand()
    q = analyse(table, ROTATION_DESIGN, LetterOptions(n_boot=0)).debiased
    got = agreement(table, ROTATION_DESIGN, q, AnalysisOptions(n_boot=0)).block["C0"]
    assert got["n_prompts"] == 4 and got["argmax"] == 0.5 and got["spearman"] == 0.0
    # letters put 0.8 + 0.4 + 0.7 + 0.1 = 2.0 of 4 on X (shown 4 times each): CSD 1/2 each;
    # the text puts a = 1/(1+e) on X in both i1 prompts and b = e²/(1+e²) in both i2 prompts.
    a, b = 1 / (1 + math.e), math.e ** 2 / (1 + math.e ** 2)
    text_x = (a + b) / 2
    jsd = 0.5 * sum(0.5 * math.log2(0.5 / ((0.5 + t) / 2)) + t * math.log2(t / ((0.5 + t) / 2))
                    for t in (text_x, 1 - text_x))
    assert got["JSD"] == pytest.approx(jsd, abs=1e-12)
    x, y = got["by_group"]["X"], got["by_group"]["Y"]
    # X is picked by either reading in three prompts, by both in one (i2's first); Y likewise (i1's second)
    assert x["argmax"] == pytest.approx(1 / 3) and y["argmax"] == pytest.approx(1 / 3)
    assert x["CSD_letters"] == 0.5 and x["CSD_text"] == pytest.approx(text_x, abs=1e-12)
    assert x["CSD_diff"] == pytest.approx(0.5 - text_x, abs=1e-12) and y["CSD_diff"] == pytest.approx(text_x - 0.5)
    # debiased: q ∝ geometric means, i1 X √.32 > Y √.12, i2 X √.07 < Y √.27 — always the option the
    # text does not pick, so the debiased letters never agree and rank every prompt the other way.
    assert got["debiased"] == {"argmax": 0.0, "spearman": -1.0, "JSD": pytest.approx(got["debiased"]["JSD"])}
    assert "by_group" not in got["debiased"]


def test_group_shares_are_exposure_normalised() -> None:
    # X is shown in both prompts, Y and Z once: a reading indifferent between the two options it
    # sees favours no group (1/3 each), however often each is shown
    lp = np.array([L([.5, .5]), L([.5, .5])])
    table = _table(lp, np.array([[-1.0, -1.0 - math.log(3)], [-1.0, -1.0]]), [[0, 1], [0, 2]], ["i1", "i2"],
                   ["X", "Y", "Z"])
    got = agreement(table, ROTATION_DESIGN, None, AnalysisOptions(n_boot=0)).block["C0"]["by_group"]
    assert [got[g]["CSD_letters"] for g in "XYZ"] == pytest.approx([1 / 3] * 3)
    # text: X gets 3/4 then 1/2 of 2 showings (5/8), Y 1/4, Z 1/2 → shares ∝ (5/8, 1/4, 1/2)
    assert [got[g]["CSD_text"] for g in "XYZ"] == pytest.approx([5 / 11, 2 / 11, 4 / 11])


def test_spearman_uses_average_ranks() -> None:
    assert average_ranks(np.array([3.0, 1.0, 1.0, 2.0])).tolist() == [4.0, 1.5, 1.5, 3.0]
    assert spearman(np.array([1.0, 2, 3, 4]), np.array([1.0, 3, 2, 4])) == pytest.approx(0.8)
    # ties share their mean rank: ranks (1.5, 1.5, 3, 4) vs (1, 2, 3, 4) → 4.5 / √(4.5 · 5)
    assert spearman(np.array([1.0, 1, 2, 3]), np.array([1.0, 2, 3, 4])) == pytest.approx(4.5 / math.sqrt(22.5))
    assert np.isnan(spearman(np.zeros(4), np.array([1.0, 2, 3, 4])))
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 3, size=(50, 5)).astype(float), rng.normal(size=(50, 5))
    ours = spearman(a, b)
    ref = np.array([spearmanr(x, y).statistic if len(set(x)) > 1 else np.nan for x, y in zip(a, b)])
    np.testing.assert_allclose(ours, ref, atol=1e-12)


def _rotated(n_items: int, k: int, letters: Any, text: Any, seed: int = 0) -> ScoreTable:
    """Every item under its k cyclic orderings; `letters(i, order)` and `text(i, order)` the K scores."""
    lp, tx, orders, items = [], [], [], []
    for i in range(n_items):
        for r in range(k):
            order = [(j + r) % k for j in range(k)]
            lp.append(letters(i, order)), tx.append(text(i, order)), orders.append(order), items.append(f"i{i}")
    return _table(np.array(lp), np.array(tx, np.float64), orders, items, [f"g{o}" for o in range(k)])


def test_the_same_reading_twice_agrees_perfectly() -> None:
    rng = np.random.default_rng(0)
    content = rng.normal(size=(6, 4))
    table = _rotated(6, 4, lambda i, o: content[i][o] - 2.0, lambda i, o: content[i][o] * 1.0)
    table = replace(table, text_logprobs=table.logprobs - 5.0)  # a constant shift is the same reading
    out = agreement(table, ROTATION_DESIGN, None, AnalysisOptions(n_boot=200))
    got, ci = out.block["C0"], out.ci["C0"]
    assert got["argmax"] == 1.0 and got["spearman"] == pytest.approx(1.0) and got["JSD"] == pytest.approx(0, abs=1e-12)
    assert all(g["CSD_diff"] == pytest.approx(0, abs=1e-12) for g in got["by_group"].values())
    # a group that either reading picks, both pick; one never picked has no agreement rate
    picked = {f"g{o}" for o in np.asarray(table.order)[np.arange(24), table.logprobs.argmax(axis=1)]}
    assert {g: v["argmax"] for g, v in got["by_group"].items() if g in picked} == {g: 1.0 for g in picked}
    assert all(math.isnan(v["argmax"]) for g, v in got["by_group"].items() if g not in picked)
    assert ci["argmax"] == [1.0, 1.0] and ci["JSD"][1] == pytest.approx(0, abs=1e-12)


def test_a_letter_locked_model_disagrees_with_a_content_driven_text() -> None:
    # letters: A far above three tied letters, whatever is shown; text: option 0 > 1 > 2 > 3
    locked = _rotated(5, 4, lambda i, o: [-0.1, -3.0, -3.0, -3.0], lambda i, o: [-1.0 - x for x in o])
    got = agreement(locked, ROTATION_DESIGN, None, AnalysisOptions(n_boot=0)).block["C0"]
    assert got["argmax"] == 0.25  # only the ordering that shows option 0 at A
    # letter ranks (4, 2, 2, 2) against text ranks: ρ = (2·rank_A − 5)/√15, rank_A = 4, 3, 2, 1 → mean 0
    assert got["spearman"] == pytest.approx(0.0, abs=1e-12)
    g0, g1 = got["by_group"]["g0"], got["by_group"]["g1"]
    assert g0["argmax"] == 0.25 and g1["argmax"] == 0.0  # the text always picks g0; the letters g1 once
    assert g0["CSD_letters"] == pytest.approx(0.25) and g0["CSD_diff"] < -0.2
    # a model whose letters follow the content agrees with that text everywhere
    content = _rotated(5, 4, lambda i, o: [-1.0 - x for x in o], lambda i, o: [-2.0 * (1 + x) for x in o])
    assert agreement(content, ROTATION_DESIGN, None, AnalysisOptions(n_boot=0)).block["C0"]["argmax"] == 1.0


def test_a_bootstrap_replicate_is_the_audit_of_its_resample() -> None:
    """Item weights [2, 0, 1] give exactly the audit of the table i0, i0', i2."""
    rng = np.random.default_rng(3)
    lps, txs = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    table = _rotated(3, 4, lambda i, o: lps[i][o], lambda i, o: txs[i][o])
    keep = [0, 0, 2]
    dup = _rotated(3, 4, lambda i, o: lps[keep[i]][o], lambda i, o: txs[keep[i]][o])
    item = np.unique(table.item_id.astype(str), return_inverse=True)[1]
    names = [f"g{o}" for o in range(4)]

    def audit(t: ScoreTable, w: np.ndarray) -> dict[str, Any]:
        a = Reading(t.logprobs, choice_probs(t.logprobs))
        b = Reading(t.text_logprobs, choice_probs(t.text_logprobs))
        return evaluate(pair_sums(a, b, np.asarray(t.groups), item, 3, names), w, names)

    weighted, direct = audit(table, np.array([2.0, 0.0, 1.0])), audit(dup, np.ones(3))
    for key in ("argmax", "spearman", "JSD"):
        assert float(weighted[key]) == pytest.approx(float(direct[key]), abs=1e-12), key
    for g in names:
        for key in ("argmax", "CSD_diff"):
            expected = float(direct["by_group"][g][key])
            assert float(weighted["by_group"][g][key]) == pytest.approx(expected, abs=1e-12, nan_ok=True)


# --- the bench hook: the `text` trees through the bench's own code -------------------------------

CULTURES = ["US", "UK", "China", "Assam"]


def _disco(text: bool) -> ScoreTable:
    items = [Item(item_id=f"i{n}", question="q?", user_instruction="local please", options=tuple(
        Option(key=x, text=f"opt {x}", group=c, context=f"fact {c}") for x, c in zip("ABCD", CULTURES)))
        for n in range(4)]
    prompts = build_prompts(items)
    rng = np.random.default_rng(0)
    lp = np.log(rng.dirichlet(np.ones(4), size=len(prompts)) * 0.9)
    content = {c: -float(i + 1) for i, c in enumerate(CULTURES)}
    return ScoreTable(
        prompt_id=np.array([p.prompt_id for p in prompts]), item_id=np.array([p.item_id for p in prompts], object),
        design=design_columns(prompts),
        groups=np.array([list(p.groups) for p in prompts], object), logprobs=lp.astype(np.float32),
        greedy_valid=np.ones(len(prompts), bool), order=np.array([list(p.order) for p in prompts]),
        text_logprobs=np.array([[content[g] * 3 for g in p.groups] for p in prompts]) if text else None,
        text_n_tokens=np.full((len(prompts), 4), 2) if text else None,
        text_n_bytes=np.array([[len(g) + 1 for g in p.groups] for p in prompts]) if text else None)


def _compute(table: ScoreTable, opts: AnalysisOptions, spec: Any) -> dict[str, Any]:
    return compute(table, DiscoAnalysis(temperature=opts.temperature, n_boot=opts.n_boot, seed=opts.seed))


OPTS = AnalysisOptions(n_boot=100)


def test_the_text_trees_are_the_bench_metrics_of_the_text_scores() -> None:
    table = _disco(text=True)
    ci95: dict[str, Any] = {}
    out = letter_blocks(_compute, table, ROTATION_DESIGN, OPTS, None, False, ci95)
    box = replicates_of(out)
    direct = _compute(replace(table, logprobs=table.text_logprobs), OPTS, None)
    assert out["text"] == direct["expected"] and ci95["text"] == direct["ci95"]["expected"]
    norm = _compute(replace(table, logprobs=table.text_logprobs / table.text_n_bytes), OPTS, None)
    assert out["text_norm"] == norm["expected"] and ci95["text_norm"] == norm["ci95"]["expected"]
    # the text prefers US > UK > China > Assam whatever the letters say: its CSD says so
    csd = out["text"]["C0"]["CSD"]
    assert csd["US"] > csd["UK"] > csd["China"] > csd["Assam"]
    assert out["text"] != _compute(table, OPTS, None)["expected"]
    assert set(out["agreement"]) == {"C0", "C1", "C2", "C3"} and out["agreement"]["C0"]["debiased"] is not None
    assert {"text", "text_norm", "agreement"} <= set(box)
    assert np.asarray(box["agreement"]["C0"]["argmax"]).shape == (OPTS.n_boot,)


def test_ten_options_under_cyclic_rotations_go_through_the_cluster_metrics() -> None:
    # a 10-option bench: every item under its 10 rotations; the text ranks the clusters in a fixed
    # order, the letters rank them the same way under a strong pull to letter A and some noise
    rng = np.random.default_rng(5)
    rank = {c: -0.5 * i for i, c in enumerate(CLUSTERS)}
    table = _rotated(6, 10, lambda i, o: np.array([rank[CLUSTERS[x]] for x in o]) + 10.0 * (np.arange(10) == 0)
                     + rng.normal(scale=0.3, size=10), lambda i, o: [rank[CLUSTERS[x]] for x in o])
    table = replace(table, groups=np.vectorize(lambda g: CLUSTERS[int(g[1:])], otypes=[object])(table.groups))

    def ccd(t: ScoreTable, opts: AnalysisOptions, spec: Any) -> dict[str, Any]:
        return ccd_compute(t, opts)

    ci95: dict[str, Any] = {}
    out = letter_blocks(ccd, table, ROTATION_DESIGN, OPTS, None, False, ci95)
    direct = ccd(replace(table, logprobs=table.text_logprobs), OPTS, None)["expected"]
    assert json.dumps(out["text"], sort_keys=True) == json.dumps(direct, sort_keys=True)  # NaN where no domain
    shares = out["text"]["shares"]
    assert max(shares, key=shares.get) == CLUSTERS[0] and min(shares, key=shares.get) == CLUSTERS[-1]
    audit = out["agreement"]["C0"]
    assert set(audit["by_group"]) == set(CLUSTERS) and audit["n_prompts"] == 60
    # the text always picks cluster 0; the letters pick A whatever it shows (cluster 0 in 1 rotation
    # of 10); with the letter prior removed they follow the content, as the text does
    assert audit["argmax"] == pytest.approx(0.1) and audit["debiased"]["argmax"] == 1.0
    assert audit["by_group"][CLUSTERS[0]]["CSD_diff"] < 0 < audit["by_group"][CLUSTERS[-1]]["CSD_diff"]
    assert ci95["agreement"]["C0"]["argmax"][0] <= audit["argmax"] <= ci95["agreement"]["C0"]["argmax"][1]


def test_a_run_without_a_text_reading_gains_no_key() -> None:
    with_text, ci_text = _disco(text=True), {}
    letters_only, ci_letters = _disco(text=False), {}
    a = letter_blocks(_compute, letters_only, ROTATION_DESIGN, OPTS, None, False, ci_letters)
    b = letter_blocks(_compute, with_text, ROTATION_DESIGN, OPTS, None, False, ci_text)
    assert set(b) - set(a) == {"text", "text_norm", "agreement"} and set(ci_text) - set(ci_letters) == {
        "text", "text_norm", "agreement"}
    # the letter reading of a paired run is the letters-only run's, key for key and in order
    assert list(a) == [k for k in b if k in a] and all(a[k] == b[k] for k in a)
    assert list(ci_letters) == [k for k in ci_text if k in ci_letters]
    assert agreement_section({**a, "ci95": ci_letters}) == ""


def test_the_report_says_how_often_letters_and_text_agree() -> None:
    table = _hand()
    metrics = {"bench": "x", "model": "m", "n_prompts": 4, "bootstrap": {"n_boot": 0}, "expected": {},
               "ci95": {}, **letter_blocks(lambda t, o, s: {"expected": {}, "greedy": {}, "ci95": {}}, table,
                                           ROTATION_DESIGN, AnalysisOptions(n_boot=0), None, False, {})}
    text = agreement_section(metrics)
    assert "## Letters and answer text" in text
    assert "C0: letters and text pick the same option in 50% of 4 prompts (0% with the letter prior removed)" in text
    assert "| C0 | letters | 0.500 | 0.000 |" in text
    assert "| X | 0.333 | 0.500 | 0.575 | -0.075 |" in text
    assert text in letter_report(lambda m: "# title\n\nbody\n")(metrics, _NoGenerationRun())


class _NoGenerationRun:
    manifest = Manifest.from_json({"backend": {"mode": "letters+text"}})


def test_an_empty_continuation_has_no_per_byte_score() -> None:
    table = replace(_hand(), text_n_bytes=np.array([[4, 4], [4, 0], [4, 4], [4, 4]]))
    with pytest.raises(ProbeInputError, match="prompt_id 1: text_n_bytes"):
        per_byte(table)


class _TextRun:
    """What the metrics hook reads of a letters+text run: its manifest and its joined table."""

    def __init__(self, table: ScoreTable, mode: str = "letters+text") -> None:
        self._table = table
        self.manifest = Manifest.from_json({"backend": {"mode": mode},
                                            "bench": {"config": {"name": "disco", "kind": "disco"}}})

    def table(self) -> ScoreTable:
        return self._table


def test_the_metrics_hook_audits_the_masked_prompts_only() -> None:
    table = _disco(text=True)
    mask = np.isin(table.item_id.astype(str), ["i0", "i2"])
    hook = letter_metrics(_compute, DiscoSpec, ROTATION_DESIGN)
    got = hook(_TextRun(table), mask, AnalysisOptions(n_boot=0))  # type: ignore[arg-type]
    kept = table.subset(mask)
    assert got["n_prompts"] == int(mask.sum()) == sum(v["n_prompts"] for v in got["agreement"].values())
    direct = _compute(replace(kept, logprobs=kept.text_logprobs), AnalysisOptions(n_boot=0), None)
    assert got["text"] == direct["expected"]
    q = analyse(kept, ROTATION_DESIGN, LetterOptions(n_boot=0)).debiased
    assert got["agreement"] == agreement(kept, ROTATION_DESIGN, q, AnalysisOptions(n_boot=0)).block


def test_a_text_only_run_has_no_letters_to_audit() -> None:
    # `text` mode: the table's log-probs are the text scores, so `expected` is the text tree itself
    table = _disco(text=True)
    table = replace(table, logprobs=table.text_logprobs)
    run = _TextRun(table, "text")
    got = letter_metrics(_compute, DiscoSpec, ROTATION_DESIGN)(run, None,  # type: ignore[arg-type]
                                                                AnalysisOptions(n_boot=0))
    assert "text" not in got and "agreement" not in got
    assert got["text_norm"] == _compute(replace(table, logprobs=per_byte(table)), AnalysisOptions(n_boot=0), None)[
        "expected"]


def _sweep_run(root: Path, name: str, agreement_c0: dict[str, float] | None) -> None:
    d = root / name
    d.mkdir(parents=True)
    m = {"C0": {"KL": 0.1, "Gini": 0.3}}
    metrics: dict[str, Any] = {"expected": m, "greedy": m, "ci95": {"expected": {}}}
    if agreement_c0 is not None:
        metrics["agreement"] = {"C0": agreement_c0}
        metrics["ci95"]["agreement"] = {"C0": {"argmax": [0.5, 0.7], "JSD": [0.01, 0.03]}}
    (d / "manifest.json").write_text(json.dumps({"model": {"name": name, "kind": "instruct"},
                                                 "bench": {"name": "disco", "kind": "disco"}}))
    (d / "metrics.json").write_text(json.dumps(metrics))
    (d / "DONE").write_text("complete\n")


def test_sweep_columns_appear_only_in_a_sweep_with_a_text_reading(tmp_path: Path) -> None:
    disco = get_task("disco")
    _sweep_run(tmp_path / "letters", "a", None)
    letters_only = bench_table(load_entries([tmp_path / "letters"]), disco)
    assert "letters = text" not in letters_only and "JSD letters‖text" not in letters_only
    _sweep_run(tmp_path / "both", "a", None)
    _sweep_run(tmp_path / "both", "b", {"argmax": 0.6, "JSD": 0.02})
    both = bench_table(load_entries([tmp_path / "both"]), disco)
    assert "letters = text (C0)" in both and "JSD letters‖text (C0)" in both
    assert "0.600 [0.500, 0.700]" in both and "0.020 [0.010, 0.030]" in both
    assert "no agreement: the run has no answer-text reading" in both  # run a's cells say why they are empty


def test_each_reading_against_the_generated_answers_by_hand() -> None:
    # generated: prompt 0 → A (X), prompt 1 → A (Y), prompt 2 invalid (absent), prompt 3 → B (X)
    table = _hand()
    gen = table.subset(np.array([0, 1, 3]))
    gen = replace(gen, logprobs=np.array([[0.0, -np.inf], [0.0, -np.inf], [-np.inf, 0.0]]), text_logprobs=None)
    q = analyse(table, ROTATION_DESIGN, LetterOptions(n_boot=0)).debiased
    got = choice_agreement(table, gen, ROTATION_DESIGN, q, AnalysisOptions(n_boot=0)).block["C0"]
    # letters pick X, Y, Y: 2 of 3; text Y, Y, X: 2 of 3; debiased q picks X, X, Y: 1 of 3
    assert got["n_prompts"] == 3
    assert (got["letters"]["argmax"], got["text"]["argmax"], got["debiased"]["argmax"]) == pytest.approx(
        (2 / 3, 2 / 3, 1 / 3))
    # generated shares: X picked 2 of its 3 showings, Y 1 of 3 → (2/3, 1/3); letters put .8 + .4 + .1
    # on X and .2 + .6 + .9 on Y over the same three prompts → (1.3, 1.7) / 3 → shares (.4333, .5667)
    gen_x, let_x = 2 / 3, 1.3 / 3
    jsd = 0.5 * sum(a * math.log2(a / ((a + b) / 2)) + b * math.log2(b / ((a + b) / 2))
                    for a, b in ((gen_x, let_x), (1 - gen_x, 1 - let_x)))
    assert got["letters"]["JSD"] == pytest.approx(jsd, abs=1e-12)
    other = replace(gen, order=np.array([[1, 0], [1, 0], [1, 0]]))
    with pytest.raises(ProbeInputError, match="different orders"):
        choice_agreement(table, other, ROTATION_DESIGN, None, AnalysisOptions(n_boot=0))


REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scored_and_generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A: the tiny model on the demo bench (C0). B: the same design "generated" by hand — each
    prompt's answer is A's argmax letter, two answers invalid — so A's letters agree with every
    valid answer of B by construction."""
    root = tmp_path_factory.mktemp("choices")
    env = {**os.environ, "PROBE_CACHE": str(root / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=demo", "bench.conditions=[C0]",
                           f"hydra.run.dir={root / 'a'}", "analysis.n_boot=100", "progress=false"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = root / "a", root / "b"
    shutil.copytree(a, b)
    scores = pq.read_table(a / "scores.parquet").sort_by("prompt_id")
    letters = json.loads((a / "manifest.json").read_text())["letters"]
    picks = np.asarray(scores.column("letter_logprobs").to_pylist()).argmax(axis=1)
    rows = [{"prompt_id": int(p), "text": letters[k], "parsed_letter": None if i < 2 else letters[k], "rationale": None}
            for i, (p, k) in enumerate(zip(scores.column("prompt_id").to_pylist(), picks))]
    pq.write_table(pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA), b / "generations.parquet")
    for name in ("scores.parquet", "scores.safetensors"):
        (b / name).unlink()
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["backend"]["mode"] = "generate"
    (b / "manifest.json").write_text(json.dumps(manifest))
    return a, b


def test_compare_reads_each_reading_against_the_generated_answers(
        scored_and_generated: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = scored_and_generated
    assert compare_main([str(a), str(b), "agreement=true", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    n = int(pq.read_table(a / "prompts.parquet").num_rows) - 2
    # plain text on the terminal: aligned columns, no markdown table or code marks
    assert re.search(rf"^C0 +{n} +letters +1\.000 \[1\.000, 1\.000\]", out, re.MULTILINE), out
    assert re.search(rf"^C0 +{n} +debiased ", out, re.MULTILINE) and not any(m in out for m in ("|", "**", "`"))
    assert all(len(line) <= 100 for line in out.splitlines() if not line.startswith(("A = ", "B = ")))  # a terminal
    saved = json.loads((tmp_path / "agreement.json").read_text())
    assert saved["agreement"]["C0"]["letters"]["argmax"] == 1.0 and saved["agreement"]["C0"]["n_prompts"] == n
    assert "text" not in saved["agreement"]["C0"]  # A has no text reading
    assert compare_main([str(b), str(a), "agreement=true"]) == 2
    assert "compares a scored run (A) with a generation run (B)" in capsys.readouterr().err
    assert compare_main([str(a), str(b), "agreement=maybe"]) == 2
    assert "agreement: expected true or false, got 'maybe'" in capsys.readouterr().err
