"""The letter prior on the designs that can mislead it: DiSCo's C3 primacy and item-specific
letter preferences (common letter share vs letter × group), incomplete groups, unbalanced
single-ordering designs, K = 2, and one-hot choices (the pairwise conditional fit is unbiased
where the joint fit is not; the greedy picks of a letter run get their own prior)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from probe.metrics.ipf import fit_choices
from probe.metrics.letter_warnings import prior_threshold
from probe.metrics.letters import COUNTS, NONE, ROTATIONS, LetterOptions, analyse, label_balance
from probe.results.scores import ScoreTable
from probe.benches.forced import ROTATION_DESIGN as DESIGN

K = 4


def _table(lp: np.ndarray, orders: np.ndarray, items: list[str], conds: list[str],
           ctx: list[int] | None = None) -> ScoreTable:
    n, k = lp.shape
    return ScoreTable(prompt_id=np.arange(n), item_id=np.array(items, object),
                      design={"condition": np.array(conds, object), "target": np.array([None] * n, object),
                              "rotation": np.zeros(n, np.int64),
                              "ctx_rotation": np.array(ctx if ctx is not None else [-1] * n, np.int64)},
                      groups=np.array([[f"g{o}" for o in order] for order in orders], object),
                      logprobs=lp.astype(np.float64), greedy_valid=np.ones(n, bool), order=orders.astype(np.int64))


def _rotations(k: int) -> np.ndarray:
    return np.array([[(j + r) % k for j in range(k)] for r in range(k)])


def _normalise(x: np.ndarray) -> np.ndarray:
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _c3_like(primacy: float, item_letter: float, n_items: int = 5, seed: int = 1) -> ScoreTable:
    """Each item under four context rotations j, each with all four option rotations; the option
    at letter j gets `primacy` (its fact sits in slot 1), and each item prefers one letter of its
    own by `item_letter`. No common letter prior."""
    rng = np.random.default_rng(seed)
    lp, orders, items, ctx = [], [], [], []
    for i in range(n_items):
        c = rng.normal(size=K)
        own = np.zeros(K)
        own[i % K] = item_letter
        for j in range(K):
            for order in _rotations(K):
                x = c[order] + own + primacy * (np.arange(K) == j)
                lp.append(_normalise(x)), orders.append(order), items.append(f"i{i}"), ctx.append(j)
    return _table(np.array(lp), np.array(orders), items, ["C3"] * len(lp), ctx)


def test_primacy_is_letter_by_group_not_a_common_letter_effect() -> None:
    """Slot 1's letter moves with the context rotation: averaged over j it is no letter prior.
    The split puts it in letter × group, π stays uniform, and no warning fires."""
    res = analyse(_c3_like(primacy=3.0, item_letter=0.0), DESIGN, LetterOptions(n_boot=0))
    split = res.blocks["letter_split"]["C3"]
    assert split["letter"] < 1e-12 and split["letter_by_group"] > split["content"]
    assert sum(split.values()) == pytest.approx(1.0, abs=1e-12)
    assert np.abs(np.array(list(res.blocks["letter_prior"]["C3"].values())) - 0.25).max() < 1e-12
    assert res.blocks["letter_warnings"] == []


def test_item_specific_letter_preferences_are_letter_by_group() -> None:
    """Five items, each preferring its own letter (items 0 and 4 the same): the common part is
    what the items share — exactly the letter SS of the mean letter effect."""
    res = analyse(_c3_like(primacy=0.0, item_letter=2.0), DESIGN,
                  LetterOptions(n_boot=0)).blocks["letter_split"]["C3"]
    # letter effect of an item preferring letter m, centred: 2·(e_m − 1/4); the mean over the
    # five items (letters 0, 1, 2, 3, 0) is 2·((2, 1, 1, 1)/5 − 1/4)
    a = [2.0 * (np.eye(K)[m] - 0.25) for m in (0, 1, 2, 3, 0)]
    abar = np.mean(a, axis=0)
    common, total_letter = 20 * K * (abar ** 2).sum(), 4 * K * sum((x ** 2).sum() for x in a)
    assert res["letter"] / (res["letter"] + res["letter_by_group"]) == pytest.approx(common / total_letter, rel=1e-9)
    assert res["residual"] < 1e-12


def test_the_prior_reads_complete_groups_only() -> None:
    """Dropping one prompt leaves its group incomplete: π equals the π of the table without that
    whole group (it is no longer pooled), and the group is debiased as p / π."""
    rng = np.random.default_rng(0)
    prior = np.array([0.1, 0.2, 0.5, 0.2])
    lp, orders, items = [], [], []
    for i in range(6):
        c = rng.normal(size=K)
        for order in _rotations(K):
            lp.append(_normalise(np.log(prior) + c[order] + rng.normal(scale=0.3, size=K)))
            orders.append(order), items.append(f"i{i}")
    full = _table(np.array(lp), np.array(orders), items, ["C0"] * 24)
    drop_one = full.subset(np.arange(24) != 5)
    drop_group = full.subset(np.array(items) != "i1")
    a = analyse(drop_one, DESIGN, LetterOptions(n_boot=0)).blocks
    b = analyse(drop_group, DESIGN, LetterOptions(n_boot=0)).blocks
    assert a["letter_prior_estimator"]["C0"]["estimator"] == "mixed"
    assert a["letter_prior"]["C0"] == pytest.approx(b["letter_prior"]["C0"], abs=1e-12)


def test_an_unbalanced_single_ordering_design_gets_no_prior() -> None:
    """One ordering per item, three items of a four-row square: the labels are not balanced
    across letters, so no π and no debiased distribution; a full square is balanced."""
    rows = _rotations(K)
    lp = np.log(np.full((K, K), 0.25))
    assert label_balance(np.array([[f"g{o}" for o in r] for r in rows])) == pytest.approx(1.0)
    part = _table(lp[:3], rows[:3], ["a", "b", "c"], ["latin_square"] * 3)
    res = analyse(part, DESIGN, LetterOptions(n_boot=10))
    est = res.blocks["letter_prior_estimator"]["latin_square"]
    assert est["estimator"] == NONE and est["label_balance"] < 0.9 and "bench.limit" in est["reason"]
    assert res.debiased is None and "latin_square" not in res.blocks["letter_prior"]
    single = analyse(_table(lp[:1], rows[:1], ["a"], ["latin_square"]), DESIGN, LetterOptions(n_boot=0))
    assert single.debiased is None and single.blocks["letter_prior_estimator"]["latin_square"]["label_balance"] == 0.0


def test_two_options_can_fire_the_prior_criterion() -> None:
    assert prior_threshold(2, 2.0) == 0.75 and prior_threshold(4, 2.0) == 0.5 and prior_threshold(10, 2.0) == 0.2
    rng = np.random.default_rng(3)
    lp, orders, items = [], [], []
    for i in range(8):
        c = rng.normal(scale=0.1, size=2)
        for order in _rotations(2):
            lp.append(_normalise(np.log([0.8, 0.2]) + c[order])), orders.append(order), items.append(f"i{i}")
    res = analyse(_table(np.array(lp), np.array(orders), items, ["C0"] * 16), DESIGN, LetterOptions(n_boot=0))
    (w,) = res.blocks["letter_warnings"]
    assert w["letter"] == "A" and "prior" in w["reasons"] and w["threshold"] == 0.75


def _sampled_picks(prior: np.ndarray, n_items: int, seed: int) -> ScoreTable:
    """One-hot picks sampled from π_j q(o) / Z under all K rotations of each item."""
    rng = np.random.default_rng(seed)
    lp, orders, items = [], [], []
    for i in range(n_items):
        c = rng.normal(size=K)
        for order in _rotations(K):
            p = np.exp(_normalise(np.log(prior) + c[order]))
            onehot = np.full(K, -np.inf)
            onehot[rng.choice(K, p=p)] = 0.0
            lp.append(onehot), orders.append(order), items.append(f"i{i}")
    return _table(np.array(lp), np.array(orders), items, ["C0"] * len(lp))


def test_the_pairwise_fit_of_generated_choices_is_unbiased_where_the_joint_fit_is_not() -> None:
    """True π_A = 0.40: the pairwise conditional fit recovers it; the joint maximum-likelihood
    fit of π and every item's content reads it far from the truth (incidental parameters)."""
    prior = np.array([0.4, 0.2, 0.2, 0.2])
    table = _sampled_picks(prior, n_items=3000, seed=7)
    res = analyse(table, DESIGN, LetterOptions(n_boot=40, fit_boot=40), generated=True)
    got = np.array(list(res.blocks["letter_prior"]["C0"].values()))
    assert res.blocks["letter_prior_estimator"]["C0"]["prior_fit"] == "pairwise_conditional"
    assert np.abs(got - prior).max() < 0.02
    lo, hi = res.ci["letter_prior"]["C0"]["A"]
    assert lo < 0.4 < hi and hi - lo < 0.06
    key = np.arange(len(table.prompt_id))[:, None] // K * K + table.order
    joint = fit_choices(np.isfinite(table.logprobs).astype(float), np.ones((1, len(key))), key, max_iter=3000).prior[0]
    assert joint[0] > 0.45  # the bias the pairwise fit removes


def test_greedy_picks_of_a_letter_run_warn_by_their_pick_shares() -> None:
    """Probabilities mildly prefer C (π_C 0.35 < 0.5, and the content varies more than the letter),
    but C is every prompt's argmax: the pick shares name C and the warning fires on them alone,
    saying so."""
    prior = np.array([0.21, 0.22, 0.35, 0.22])
    content = np.array([0.22, -0.22, 0.22, -0.22])  # a range below C's letter lead, more variance
    lp, orders, items = [], [], []
    for i in range(10):
        for order in _rotations(K):
            lp.append(_normalise(np.log(prior) + np.roll(content, i)[order]))
            orders.append(order), items.append(f"i{i}")
    res = analyse(_table(np.array(lp), np.array(orders), items, ["C0"] * 40), DESIGN, LetterOptions(n_boot=0))
    assert res.blocks["letter_prior_estimator"]["C0"]["estimator"] == ROTATIONS
    assert res.blocks["letter_pick_shares"]["C0"] == {"A": 0.0, "B": 0.0, "C": 1.0, "D": 0.0}
    (w,) = res.blocks["letter_warnings"]
    assert w["letter"] == "C" and w["reasons"] == ["pick_share"] and w["greedy_picks"] == 40
    from probe.viz.letters import letter_warnings

    (found,) = letter_warnings([w])
    text = " ".join(found.details)
    assert "where the picks pile on it (C0), metrics of the greedy picks mostly count letter C" in text
    assert "measure the letter" not in text
    assert COUNTS == "count_fit"


def _locked(letters: list[int], seed: int = 0) -> ScoreTable:
    """Deterministic picks: item i always answers letter `letters[i]`, whatever it shows."""
    rng = np.random.default_rng(seed)
    lp, orders, items = [], [], []
    for i, letter in enumerate(letters):
        for order in _rotations(K)[rng.permutation(K)]:
            onehot = np.full(K, -np.inf)
            onehot[letter] = 0.0
            lp.append(onehot), orders.append(order), items.append(f"i{i}")
    return _table(np.array(lp), np.array(orders), items, ["C0"] * len(lp))


def test_separable_picks_report_pick_shares_not_a_fitted_prior() -> None:
    """Ten items locked on C, ten on A, one on D, B never picked: every pair can be won by one
    direction of log π, so the likelihood has no maximum and a fit would print whatever the ridge
    left (D ≈ 1). The estimator says so and π is the pick shares; the warning names C."""
    res = analyse(_locked([2] * 10 + [0] * 10 + [3]), DESIGN, LetterOptions(n_boot=20), generated=True)
    est = res.blocks["letter_prior_estimator"]["C0"]
    assert est["separated"] is True and est["prior_fit"] == "pick_shares"
    assert res.blocks["letter_prior"]["C0"] == pytest.approx({"A": 10 / 21, "B": 0.0, "C": 10 / 21, "D": 1 / 21})
    assert res.blocks["letter_warnings"] == []  # 0.48 < 0.5: no letter holds half the picks
    tilted = analyse(_locked([2] * 14 + [0] * 6 + [3]), DESIGN, LetterOptions(n_boot=0), generated=True)
    (w,) = tilted.blocks["letter_warnings"]
    assert (w["letter"], w["reasons"]) == ("C", ["pick_share"]) and w["pick_share"] == pytest.approx(14 / 21)
    # sampled picks of a mixed model are not separable
    sampled = analyse(_sampled_picks(np.array([0.4, 0.2, 0.2, 0.2]), n_items=200, seed=2), DESIGN,
                      LetterOptions(n_boot=0), generated=True)
    assert sampled.blocks["letter_prior_estimator"]["C0"]["separated"] is False


def test_no_prior_still_warns_on_the_picks() -> None:
    """An unbalanced single-ordering design gets no prior, but a letter-locked model's greedy
    picks still fire the warning."""
    rows = _rotations(K)[:3]
    lp = np.log(np.tile([[0.1, 0.1, 0.7, 0.1]], (3, 1)))
    res = analyse(_table(lp, rows, ["a", "b", "c"], ["latin_square"] * 3), DESIGN, LetterOptions(n_boot=0))
    assert res.debiased is None and res.blocks["letter_prior_estimator"]["latin_square"]["estimator"] == NONE
    (w,) = res.blocks["letter_warnings"]
    assert (w["letter"], w["reasons"], w["prior"]) == ("C", ["pick_share"], None)


def test_the_summary_says_why_debiased_is_missing() -> None:
    from probe.report.summary import warnings as summary_warnings

    metrics = {"expected": {}, "debiased": None, "letter_prior_estimator": {
        "latin_square": {"estimator": NONE, "reason": "no item has all 10 orderings"}}}
    assert summary_warnings(metrics) == ["no `debiased` metrics: latin_square: no item has all 10 orderings"]


def test_the_disco_report_says_when_spd_is_undefined() -> None:
    """Items whose cultures are in neither SPD group: SPD is NaN, and the report says why."""
    from probe.benches.disco.metrics import DiscoAnalysis, compute
    from probe.benches.disco.report import report

    rng = np.random.default_rng(0)
    lp = _normalise(rng.normal(size=(8, K)))
    orders = np.tile(_rotations(K), (2, 1))
    table = _table(lp, orders, ["a"] * 4 + ["b"] * 4, ["C0"] * 8)
    table = ScoreTable(**{**table.__dict__, "groups": np.array([[["Greece", "Spain", "Algeria", "Assam"][o]
                                                                  for o in order] for order in orders], object)})
    m = compute(table, DiscoAnalysis(n_boot=0, high=("UK", "US"), low=("Ethiopia",)))
    assert np.isnan(m["expected"]["C0"]["SPD"])
    text = report({**m, "model": "m", "bench": "b", "n_items": 2, "n_prompts": 8})
    mark = re.search(r"\| SPD high − low resource \| C0 \| –(\S) \|", text).group(1)  # a footnoted gap, no nan
    assert f"- {mark} undefined: the items hold no high-resource or no low-resource culture" in text
