"""The letter-prior decomposition (docs/concepts/letter-prior.md): planted priors and contents recovered exactly, the
variance split's zeros, the count fit, PriDe's prior division, the invariance to a letter's
logit on a real (tiny) model, re-analysis, and the warnings a reader sees."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from probe.metrics.ipf import fit_choices
from probe.metrics.letters import COUNTS, PRIOR, ROTATIONS, LetterOptions, analyse
from probe.report.summary import warnings as summary_warnings
from probe.results.scores import ScoreTable
from probe.viz.letters import warnings_block
from probe.benches.forced import ROTATION_DESIGN as DESIGN

K = 4
PRIOR_TRUE = np.array([0.1, 0.2, 0.5, 0.2])


def _table(lp: list[np.ndarray], orders: list[list[int]], items: list[str], conds: list[str],
           targets: list[str | None] | None = None) -> ScoreTable:
    n = len(lp)
    return ScoreTable(prompt_id=np.arange(n), item_id=np.array(items, object),
                      design={"condition": np.array(conds, object), "target": np.array(targets or [None] * n, object),
                              "rotation": np.zeros(n, np.int64), "ctx_rotation": -np.ones(n, np.int64)},
                      groups=np.array([[f"g{o}" for o in order] for order in orders], object),
                      logprobs=np.array(lp, dtype=np.float64), greedy_valid=np.ones(n, bool),
                      order=np.array(orders, np.int64))


def _planted(prior: np.ndarray | None, content: bool, n_items: int = 6, seed: int = 0
             ) -> tuple[ScoreTable, dict[str, np.ndarray]]:
    """All K cyclic rotations of each item under two conditions; full-vocabulary log-probs =
    letter effect + content + a per-prompt offset (the rotation effect and the non-letter mass)."""
    rng = np.random.default_rng(seed)
    a = np.zeros(K) if prior is None else np.log(prior)
    lp, orders, items, conds, truth = [], [], [], [], {}
    for cond in ("C0", "C1"):
        for i in range(n_items):
            c = rng.normal(size=K) if content else np.zeros(K)
            truth[f"{cond}/{i}"] = np.exp(c) / np.exp(c).sum()
            for r in rng.permutation(K):  # stored in any order
                order = [(j + r) % K for j in range(K)]
                x = a + c[order]
                lp.append(x - np.log(np.exp(x).sum()) - rng.uniform(0, 2))
                orders.append(order), items.append(f"item-{i}"), conds.append(cond)
    return _table(lp, orders, items, conds), truth


def test_planted_prior_and_content_are_recovered_exactly() -> None:
    table, truth = _planted(PRIOR_TRUE, content=True)
    res = analyse(table, DESIGN, LetterOptions(n_boot=0))
    for cond in ("C0", "C1"):
        assert np.abs(np.array(list(res.blocks["letter_prior"][cond].values())) - PRIOR_TRUE).max() < 1e-9
        assert res.blocks["letter_prior_estimator"][cond]["estimator"] == ROTATIONS
        split = res.blocks["letter_split"][cond]
        assert sum(split.values()) == pytest.approx(1.0, abs=1e-12) and split["residual"] < 1e-12
    for row in range(len(table.prompt_id)):
        q = truth[f"{table.column('condition')[row]}/{table.item_id[row].split('-')[1]}"]
        assert np.abs(res.debiased[row] - q[table.order[row]]).max() < 1e-9


def test_split_has_no_letter_share_without_a_prior_and_no_content_share_without_content() -> None:
    no_prior = analyse(_planted(None, content=True)[0], DESIGN,
                       LetterOptions(n_boot=0)).blocks["letter_split"]["C0"]
    assert no_prior["letter"] < 1e-12 and no_prior["content"] == pytest.approx(1.0)
    no_content = analyse(_planted(PRIOR_TRUE, content=False)[0], DESIGN, LetterOptions(n_boot=0)).blocks
    assert no_content["letter_split"]["C0"]["content"] < 1e-12
    assert no_content["letter_split"]["C0"]["letter"] == pytest.approx(1.0)
    # without content the debiased distribution is uniform
    flat = analyse(_planted(PRIOR_TRUE, content=False)[0], DESIGN, LetterOptions(n_boot=0)).debiased
    assert np.abs(flat - 0.25).max() < 1e-12


def test_a_hand_computed_split() -> None:
    """One 2 × 2 group: L = [[l0, l1], [l2, l3]] with orders [0, 1], [1, 0]. Centred rows
    y = ±d_r/2 (d_r = row difference); letter mean ā = (d_0 + d_1)/4 · (1, −1); content mean
    c̄ = (d_0 − d_1)/4 · (1, −1); residual 0 (2 × 2 Latin square)."""
    p0, p1 = np.array([0.8, 0.2]), np.array([0.6, 0.4])  # rows: order [0, 1], then [1, 0]
    table = _table([np.log(p0), np.log(p1)], [[0, 1], [1, 0]], ["x", "x"], ["C0", "C0"])
    d0, d1 = np.log(0.8 / 0.2), np.log(0.6 / 0.4)
    letter, content = 2 * 2 * ((d0 + d1) / 4) ** 2, 2 * 2 * ((d0 - d1) / 4) ** 2
    split = analyse(table, DESIGN, LetterOptions(n_boot=0)).blocks["letter_split"]["C0"]
    assert split["letter"] == pytest.approx(letter / (letter + content))
    assert split["content"] == pytest.approx(content / (letter + content)) and split["residual"] < 1e-15
    # q(option 0) = geometric mean of 0.8 (letter A) and 0.4 (letter B, row 2), renormalised
    q0 = np.sqrt(0.8 * 0.4) / (np.sqrt(0.8 * 0.4) + np.sqrt(0.2 * 0.6))
    assert analyse(table, DESIGN, LetterOptions(n_boot=0)).debiased[0, 0] == pytest.approx(q0)


def test_a_constant_on_one_letter_leaves_the_debiased_distribution_unchanged() -> None:
    table, _ = _planted(PRIOR_TRUE, content=True)
    shifted = ScoreTable(**{**table.__dict__, "logprobs": table.logprobs + np.array([0, 0, 2.0, 0])})
    a, b = analyse(table, DESIGN, LetterOptions(n_boot=0)), analyse(shifted, DESIGN, LetterOptions(n_boot=0))
    assert np.abs(a.debiased - b.debiased).max() < 1e-12
    ratio_c = b.blocks["letter_prior"]["C0"]["C"] / b.blocks["letter_prior"]["C0"]["A"]
    assert ratio_c == pytest.approx(np.exp(2.0) * 0.5 / 0.1)


def test_single_ordering_designs_divide_by_the_pooled_prior() -> None:
    """One ordering per item (a Latin square across items): content that depends only on the
    label is balanced across letters, so π and p / π are exact."""
    c = np.log(np.array([0.4, 0.3, 0.2, 0.1]))  # content of labels g0..g3
    lp, orders = [], []
    for r in range(K):
        order = [(j + r) % K for j in range(K)]
        x = np.log(PRIOR_TRUE) + c[order]
        lp.append(x - np.log(np.exp(x).sum()))
        orders.append(order)
    table = _table(lp, orders, [f"i{r}" for r in range(K)], ["latin_square"] * K)
    res = analyse(table, DESIGN, LetterOptions(n_boot=20))
    assert res.blocks["letter_prior_estimator"]["latin_square"]["estimator"] == PRIOR
    assert np.abs(np.array(list(res.blocks["letter_prior"]["latin_square"].values())) - PRIOR_TRUE).max() < 1e-9
    q = np.exp(c) / np.exp(c).sum()
    assert np.abs(res.debiased - q[np.array(orders)]).max() < 1e-9
    assert "latin_square" not in res.blocks["letter_split"]  # no complete group: no split


def test_count_fit_recovers_a_planted_model_from_its_expected_counts() -> None:
    """IPF on the model's own expected counts (fractional) is the maximum-likelihood fit, which
    reproduces the planted prior and contents."""
    table, truth = _planted(PRIOR_TRUE, content=True)
    p = np.exp(table.logprobs) / np.exp(table.logprobs).sum(axis=1, keepdims=True)
    g = np.unique([f"{c}/{i}" for c, i in zip(table.column("condition"), table.item_id)], return_inverse=True)[1]
    key = g[:, None] * K + table.order
    fit = fit_choices(p, np.ones((1, len(p))), key, max_iter=5000, tol=1e-12)
    assert np.abs(fit.prior[0] - PRIOR_TRUE).max() < 1e-6
    q = fit.content[0][key] / fit.content[0][key].sum(axis=1, keepdims=True)
    for row in range(len(p)):
        want = truth[f"{table.column('condition')[row]}/{table.item_id[row].split('-')[1]}"][table.order[row]]
        assert np.abs(q[row] - want).max() < 1e-6


def test_generated_choices_of_a_letter_locked_model() -> None:
    """Every generated answer is C: the count fit puts the whole prior on C, leaves the content
    uniform, and the warning fires on the prior."""
    table, _ = _planted(PRIOR_TRUE, content=True)
    onehot = np.full(table.logprobs.shape, -np.inf)
    onehot[:, 2] = 0.0
    res = analyse(ScoreTable(**{**table.__dict__, "logprobs": onehot}), DESIGN, LetterOptions(n_boot=50),
                  generated=True)
    # every pair is won by C: separable, so no likelihood maximum — π is the pick shares
    assert res.blocks["letter_prior"]["C0"] == {"A": 0.0, "B": 0.0, "C": 1.0, "D": 0.0}
    est = res.blocks["letter_prior_estimator"]["C0"]
    assert (est["estimator"], est["prior_fit"], est["separated"]) == (COUNTS, "pick_shares", True)
    assert np.abs(res.debiased - 0.25).max() < 1e-12 and res.ci["letter_prior"]["C0"]["C"] == [1.0, 1.0]
    w = res.blocks["letter_warnings"][0]
    assert (w["letter"], w["reasons"], w["greedy_picks"], w["n_prompts"]) == ("C", ["pick_share"], 24, 24)


def test_warnings_read_in_report_and_summary() -> None:
    metrics = {"letter_warnings": [
        {"condition": "C0", "letter": "C", "prior": 0.41, "uniform": 0.25, "threshold": 0.5, "letter_share": 0.48,
         "content_share": 0.01, "mass_moved": 0.31, "greedy_picks": 71, "n_prompts": 96,
         "reasons": ["letter_share", "pick_share"]},
        {"condition": "C1", "letter": "C", "prior": 0.44, "uniform": 0.25, "threshold": 0.5, "letter_share": 0.02,
         "content_share": 0.6, "greedy_picks": 328, "n_prompts": 384, "reasons": ["pick_share"]}]}
    block = warnings_block(metrics)
    # one sentence, then one compact table (a row per condition) and what each criterion that fired means
    assert block == [
        "> **Warning:** Letter C drives the answers in C0, C1: read the `debiased` metrics and the content share first.",
        "",
        "| condition | options | letter | prior (uniform) | letter share (content) | moves | top pick | flagged by |",
        "|---|---|---|---|---|---|---|---|",
        "| C0 | 4 | C | 0.41 (0.25) | 48% (1%) | 31% | C: 71 of 96 greedy | letter share, picks |",
        "| C1 | 4 | C | 0.44 (0.25) | 2% (60%) | – | C: 328 of 384 greedy | picks |",
        "",
        "Flagged by — letter share: the letter explains more of the log-prob variance than the content, so the "
        "metrics mostly measure the letter; picks: the greedy picks pile on it, so their metrics mostly count the "
        "letter.",
        ""]
    # several letters, more than three conditions: one sentence that counts them
    many = {"letter_warnings": [{**metrics["letter_warnings"][0], "condition": f"K{k}", "letter": letter,
                                 "uniform": 1 / k} for k, letter in ((2, "B"), (3, "A"), (5, "B"), (7, "D"))]}
    first = warnings_block(many)[0]
    assert first == ("> **Warning:** Letters B, A, D drive the answers in 4 conditions (table below): read the "
                     "`debiased` metrics and the content share first.")
    assert [row.split(" | ")[1] for row in warnings_block(many)[4:8]] == ["2", "3", "5", "7"]
    assert max(len(line) for line in block if not line.startswith("Flagged by")) < 200
    (summary,) = summary_warnings(metrics)
    assert summary.splitlines()[0] == ("letter C drives the answers in C0, C1: read the `debiased` metrics and the "
                                       "content share first.")
    assert summary.splitlines()[1] == "    - C0: prior 0.41; the letter explains 48% of the log-prob variance " \
                                      "(log scale), the content 1%; it moves 31% of the probability; 71 of 96 " \
                                      "greedy picks are C"
    assert warnings_block({"letter_warnings": []}) == []


# -- on a real (tiny) model: the pipeline, the invariance, re-analysis --------------------------

def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path, name: str, bias: float) -> Path:
    """A DiSCo run of the tiny model in-process; `bias` is added to letter C's logit by the head."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import probe.pipeline.execute as pipeline
    from probe.config import package_conf_dir
    from probe.pipeline.spec import run_config

    monkeypatch.setenv("PROBE_CACHE", str(tmp_path / "cache"))
    load = pipeline.load_model

    def biased(*args, **kwargs):  # type: ignore[no-untyped-def]
        loaded = load(*args, **kwargs)
        head = loaded.model.get_output_embeddings()
        b = torch.zeros(head.weight.shape[0])
        b[loaded.tokenizer.convert_tokens_to_ids("C")] = bias
        head.bias = torch.nn.Parameter(b)
        return loaded

    monkeypatch.setattr(pipeline, "load_model", biased)
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "bench=disco", f"bench.path={disco_csv}",
                                                       "analysis.n_boot=200", "progress=false"])
    out = tmp_path / name
    pipeline.run(run_config(OmegaConf.to_container(cfg, resolve=True), out))
    return out


def _leaves(tree: object, prefix: str = "") -> dict[str, float]:
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _leaves(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): float(tree)}  # type: ignore[arg-type]


def test_a_head_bias_on_one_letter_moves_expected_but_not_debiased(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path) -> None:
    plain = _run(tmp_path, monkeypatch, disco_csv, "plain", 0.0)
    shifted = _run(tmp_path, monkeypatch, disco_csv, "shifted", 2.0)
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (plain, shifted))
    manifest = json.loads((shifted / "manifest.json").read_text())
    assert manifest["letters"] == list("ABCD")
    da, db = _leaves(a["debiased"]), _leaves(b["debiased"])
    assert da.keys() == db.keys() and len(da) > 50
    assert max(abs(da[k] - db[k]) for k in da if np.isfinite(da[k])) < 1e-6
    assert abs(a["expected"]["C0"]["letter_probs"]["C"] - b["expected"]["C0"]["letter_probs"]["C"]) > 0.05
    assert max(abs(x - y) for x, y in zip(_leaves(a["expected"]).values(), _leaves(b["expected"]).values())
               if np.isfinite(x)) > 1e-3
    # the prior moves by exactly e² on C, relative to the other letters
    pa, pb = a["letter_prior"]["C0"], b["letter_prior"]["C0"]
    assert (pb["C"] / pb["A"]) / (pa["C"] / pa["A"]) == pytest.approx(np.exp(2.0), rel=1e-4)
    assert a["letter_split"]["C0"]["content"] > b["letter_split"]["C0"]["content"]
    # paired comparisons read the debiased block like the others
    from probe.commands.compare import paired_difference

    d = paired_difference(plain, shifted, "C2.CR", flavour="debiased")
    assert d.block == "debiased" and abs(d.delta) < 1e-6 and abs(d.ci95[0]) < 1e-6
    assert abs(paired_difference(plain, shifted, "C0.letter_probs.C", flavour="expected").delta) > 0.05

    # Re-analysis from the stored tables: the keys are recomputed, π_T ∝ π^(1/T), the split is
    # unchanged by T.
    from probe.pipeline.analysis import analyze_run

    hot = analyze_run(plain, {"temperature": 2.0})
    p1 = np.array(list(a["letter_prior"]["C0"].values()))
    p2 = np.array(list(hot["letter_prior"]["C0"].values()))
    assert np.abs(p2 - np.sqrt(p1) / np.sqrt(p1).sum()).max() < 1e-9
    assert hot["letter_split"]["C0"]["letter"] == pytest.approx(a["letter_split"]["C0"]["letter"], abs=1e-12)
    assert set(hot["ci95"]) >= {"expected", "greedy", "debiased", "letter_prior", "letter_split"}


def test_an_invalid_generation_keeps_content_per_group() -> None:
    """A model that always answers option 0, whatever its letter: dropping one output (invalid)
    must not pool the content over items; the debiased choice stays on option 0."""
    table, _ = _planted(None, content=True)
    onehot = np.where(table.order == 0, 0.0, -np.inf)
    kept = np.arange(len(onehot)) != 3
    t = ScoreTable(**{**table.__dict__, "logprobs": onehot}).subset(kept)
    res = analyse(t, DESIGN, LetterOptions(n_boot=0), generated=True)
    on_zero = np.take_along_axis(res.debiased, np.argmax(t.order == 0, axis=1)[:, None], axis=1)
    assert on_zero.min() > 0.99
    assert res.blocks["letter_prior_estimator"]["C0"]["estimator"] == COUNTS
