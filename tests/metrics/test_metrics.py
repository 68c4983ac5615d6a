"""Metric primitives and DiSCo metrics against hand-computed values.

The DiSCo example is one item (US, UK, China, Assam at A–D) scored by a fake "model" whose
choice probability of a letter is proportional to a weight of the culture shown there
(US 4, UK 2, China 1, Assam 1), multiplied by 3 for the target in C1, by 5 in C2, and by 2
for the option whose fact sits in context slot 1 in C3. Every number below is worked out by
hand from those weights; see the comments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from probe.benches.disco.data import build_prompts
from probe.benches.disco.metrics import DiscoAnalysis, compute, evaluate, item_sums
from probe.metrics.core import (
    bootstrap_weights,
    choice_probs,
    gini,
    greedy_onehot,
    jsd_bits,
    kl_to_uniform,
    normalized_entropy,
)
from probe.results.scores import ScoreTable
from probe.types import Item, Option

from conftest import design_columns

WEIGHT = {"US": 4.0, "UK": 2.0, "China": 1.0, "Assam": 1.0, "Spain": 3.0, "Ethiopia": 0.5,
          "Greece": 1.5, "Algeria": 0.7, "South_Korea": 2.5}


# --- primitives -------------------------------------------------------------------------

def test_kl_to_uniform() -> None:
    assert kl_to_uniform(np.array([0.25] * 4)) == pytest.approx(0.0)
    assert kl_to_uniform(np.array([0.5, 0.5, 0.0, 0.0])) == pytest.approx(math.log(2))
    assert kl_to_uniform(np.array([1.0, 0, 0, 0])) == pytest.approx(math.log(4))


def test_gini() -> None:
    assert gini(np.array([1.0, 1, 1, 1])) == pytest.approx(0.0)
    assert gini(np.array([1.0, 0, 0, 0])) == pytest.approx(0.75)  # (n − 1)/n
    # ascending 1..4: Σ(n+1−i)x_(i) = 4+6+6+4 = 20; (5 − 2·20/10)/4 = 0.25 = mean|xi−xj|/(2·mean)
    assert gini(np.array([4.0, 1, 3, 2])) == pytest.approx(0.25)
    assert gini(np.array([[1.0, 0], [1, 1]])) == pytest.approx([0.5, 0.0])
    assert math.isnan(float(gini(np.array([0.0, 0.0]))))


def test_jsd_bits_is_the_divergence_not_the_distance() -> None:
    assert jsd_bits(np.array([1.0, 0]), np.array([0.0, 1])) == pytest.approx(1.0)
    # m = (.75, .25): ½[.5 log2(.5/.75) + .5 log2(.5/.25)] + ½ log2(1/.75) = 0.311278
    assert jsd_bits(np.array([0.5, 0.5]), np.array([1.0, 0])) == pytest.approx(0.311278, abs=1e-6)
    p, q = np.array([0.1, 0.2, 0.7]), np.array([0.3, 0.3, 0.4])
    assert jsd_bits(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2)


def test_choice_probs_temperature_and_greedy() -> None:
    lp = np.log(np.array([[0.4, 0.2, 0.1, 0.1]]))  # letter mass 0.8
    assert choice_probs(lp) == pytest.approx(np.array([[0.5, 0.25, 0.125, 0.125]]))
    # T = 0.5 squares the odds: 16:4:1:1
    assert choice_probs(lp, 0.5) == pytest.approx(np.array([[16, 4, 1, 1]]) / 22)
    assert choice_probs(lp, 1e-4) == pytest.approx(greedy_onehot(lp))
    assert greedy_onehot(np.log(np.array([[0.3, 0.3, 0.2, 0.2]]))).tolist() == [[1, 0, 0, 0]]


def test_normalized_entropy_and_bootstrap_weights() -> None:
    assert normalized_entropy(np.array([0.25] * 4)) == pytest.approx(1.0)
    assert normalized_entropy(np.array([1.0, 0, 0, 0])) == pytest.approx(0.0)
    w = bootstrap_weights(7, 50, seed=3)
    assert w.shape == (50, 7) and (w.sum(axis=1) == 7).all()
    assert np.array_equal(w, bootstrap_weights(7, 50, seed=3))


# --- DiSCo on the hand example ----------------------------------------------------------

def _item(item_id: str, cultures: list[str]) -> Item:
    return Item(item_id=item_id, question="q?", user_instruction="local please", options=tuple(
        Option(key=L, text=f"opt {L}", group=c, context=f"fact {c}") for L, c in zip("ABCD", cultures)))


def _table(items: list[Item], mass: float = 0.9, c2_boost: dict[str, float] | None = None) -> ScoreTable:
    prompts = build_prompts(items)
    rows = []
    for p in prompts:
        w = np.array([WEIGHT[g] for g in p.groups])
        if p.value("condition") in ("C1", "C2"):
            boost = 3.0 if p.value("condition") == "C1" else (c2_boost or {}).get(p.value("target"), 5.0)
            w = w * np.array([boost if g == p.value("target") else 1.0 for g in p.groups])
        if p.value("condition") == "C3":
            w[p.value("ctx_rotation")] *= 2.0  # slot 1 holds the fact of the option at letter j
        rows.append(np.log(mass * w / w.sum()))
    return ScoreTable(
        prompt_id=np.array([p.prompt_id for p in prompts]),
        item_id=np.array([p.item_id for p in prompts], dtype=object),
        design=design_columns(prompts),
        groups=np.array([list(p.groups) for p in prompts], dtype=object),
        logprobs=np.array(rows, dtype=np.float32),
        greedy_valid=np.ones(len(prompts), dtype=bool),
    )


@pytest.fixture(scope="module")
def hand() -> dict:
    return compute(_table([_item("i1", ["US", "UK", "China", "Assam"])]), DiscoAnalysis(n_boot=0))


def test_c0_hand(hand: dict) -> None:
    c0 = hand["expected"]["C0"]
    assert c0["CSD"] == pytest.approx({"US": 0.5, "UK": 0.25, "China": 0.125, "Assam": 0.125}, abs=1e-6)
    assert c0["KL"] == pytest.approx(0.25 * math.log(2), abs=1e-6)  # .5 ln 2 + .25·0 + 2·.125 ln .5
    assert c0["Gini"] == pytest.approx(0.3125, abs=1e-6)  # (5 − 2·1.875)/4
    assert c0["SPD"] == pytest.approx((0.5 + 0.25 + 0.125) / 3 - 0.125, abs=1e-6)
    assert c0["letter_probs"] == pytest.approx({L: 0.25 for L in "ABCD"}, abs=1e-6)  # rotations balance
    g = hand["greedy"]["C0"]  # argmax is always the US option
    assert g["CSD"] == {"US": 1.0, "UK": 0.0, "China": 0.0, "Assam": 0.0}
    assert g["KL"] == pytest.approx(math.log(4)) and g["Gini"] == pytest.approx(0.75)


def test_c1_c2_hand(hand: dict) -> None:
    e = hand["expected"]
    # C1 (×3 on target): US 12/16, UK 6/12, China 3/10, Assam 3/10
    cr1 = {"US": 0.75, "UK": 0.5, "China": 0.3, "Assam": 0.3}
    assert e["C1"]["CR_by_culture"] == pytest.approx(cr1, abs=1e-6)
    assert e["C1"]["CR"] == pytest.approx(0.4625, abs=1e-6)
    assert e["C1"]["SL"] == pytest.approx({"US": 0.25, "UK": 0.25, "China": 0.175, "Assam": 0.175}, abs=1e-6)
    assert e["C1"]["SL_rate"] == pytest.approx(e["C1"]["SL"], abs=1e-6)  # one item: rates sum to 1
    # C2 (×5): US 20/24, UK 10/16, China 5/12, Assam 5/12
    cr2 = {"US": 20 / 24, "UK": 10 / 16, "China": 5 / 12, "Assam": 5 / 12}
    assert e["C2"]["CR_by_culture"] == pytest.approx(cr2, abs=1e-6)
    assert e["C2"]["CR"] == pytest.approx(0.5729167, abs=1e-6)
    assert e["C2"]["PSI"] == pytest.approx(1 - 0.5729167, abs=1e-6)
    assert e["C2"]["PSI_by_culture"] == pytest.approx({c: 1 - v for c, v in cr2.items()}, abs=1e-6)
    assert e["C2"]["gain_by_culture"] == pytest.approx({c: cr2[c] - cr1[c] for c in cr1}, abs=1e-6)
    # C2 CSD: US sel = 4·(20/24 + 4/16 + 4/12 + 4/12) = 7 over 16 appearances, etc.
    csd2 = {"US": 7 / 16, "UK": 4.1666667 / 16, "China": 2.4166667 / 16, "Assam": 2.4166667 / 16}
    assert e["C2"]["CSD"] == pytest.approx(csd2, abs=1e-6)
    spd2 = (7 / 16 + 4.1666667 / 16 + 2.4166667 / 16) / 3 - 2.4166667 / 16
    assert e["C2"]["SPD"] == pytest.approx(spd2, abs=1e-6)
    assert e["SPD_reduction"] == pytest.approx(e["C0"]["SPD"] - spd2, abs=1e-6)


def test_spd_compliance_hand(hand: dict) -> None:
    """CR(high) − CR(low) with high = US, UK, China and low = Assam present (the documented defaults)."""
    e = hand["expected"]
    assert e["C1"]["SPD_compliance"] == pytest.approx((0.75 + 0.5 + 0.3) / 3 - 0.3, abs=1e-6)
    spd_c2 = (20 / 24 + 10 / 16 + 5 / 12) / 3 - 5 / 12
    assert e["C2"]["SPD_compliance"] == pytest.approx(spd_c2, abs=1e-6)
    assert e["SPD_compliance_reduction"] == pytest.approx(e["C0"]["SPD"] - spd_c2, abs=1e-6)


def test_a_perfectly_compliant_model_has_no_pooled_c2_gap() -> None:
    """Pooled-CSD SPD(C2) is 0 for a model that always picks the target, whatever its prior;
    SPD_compliance measures the gap in steering success the paper's explanation describes."""
    items = [_item("i1", ["US", "UK", "China", "Assam"])]
    perfect = compute(_table(items, c2_boost={c: 1e9 for c in WEIGHT}), DiscoAnalysis(n_boot=0))["expected"]
    assert perfect["C2"]["SPD"] == pytest.approx(0.0, abs=1e-6)
    assert perfect["C2"]["SPD_compliance"] == pytest.approx(0.0, abs=1e-6)
    # steering works for the high-resource targets only; Assam keeps its ×5 (CR 5/12)
    uneven = compute(_table(items, c2_boost={"US": 1e9, "UK": 1e9, "China": 1e9}),
                     DiscoAnalysis(n_boot=0))["expected"]
    assert uneven["C2"]["SPD_compliance"] == pytest.approx(1 - 5 / 12, abs=1e-6)


def test_c3_hand(hand: dict) -> None:
    c3 = hand["expected"]["C3"]
    # p_b(c) = w_c·(2 if c == b)/(8 + w_b); every j boosts each culture once over the 4 k.
    csd3 = {"US": (8 / 12 + 4 / 10 + 4 / 9 + 4 / 9) / 4, "UK": (2 / 12 + 4 / 10 + 2 / 9 + 2 / 9) / 4,
            "China": (1 / 12 + 1 / 10 + 2 / 9 + 1 / 9) / 4, "Assam": (1 / 12 + 1 / 10 + 1 / 9 + 2 / 9) / 4}
    assert c3["CSD"] == pytest.approx(csd3, abs=1e-6)
    assert c3["CSD_aligned"] == pytest.approx(csd3, abs=1e-6)
    names = sorted(csd3)
    p = np.array([csd3[c] for c in names])
    q = np.array([hand["expected"]["C0"]["CSD"][c] for c in names])
    assert c3["JSD"] == pytest.approx(jensenshannon(p, q, base=2) ** 2, abs=1e-6)
    ppr = (8 / 12 + 4 / 10 + 2 / 9 + 2 / 9) / 4  # chance of the boosted (slot-1) option
    assert c3["PPR"] == pytest.approx(ppr, abs=1e-6)
    assert c3["PPR_by_ctx_rotation"] == pytest.approx({str(j): ppr for j in range(4)}, abs=1e-6)
    # sample agreement = Σ_c Π_b p_b(c), the same for every k
    csc = (8 / 12 * 4 / 10 * 4 / 9 * 4 / 9) + (2 / 12 * 4 / 10 * 2 / 9 * 2 / 9) + 2 * (1 / 12 * 1 / 10 * 2 / 9 * 1 / 9)
    assert c3["sample_agreement"] == pytest.approx(csc, abs=1e-6) and "CSC" not in c3
    # letter distribution at fixed j: slot-1 letter gets `ppr`, the letter d after it the mean
    # over m of w_{m+d}/(8 + w_m) (cultures in order US, UK, China, Assam)
    d1 = (2 / 12 + 1 / 10 + 1 / 9 + 4 / 9) / 4
    d2 = (1 / 12 + 1 / 10 + 4 / 9 + 2 / 9) / 4
    d3 = (1 / 12 + 4 / 10 + 2 / 9 + 1 / 9) / 4
    h = normalized_entropy(np.array([ppr, d1, d2, d3]))
    assert c3["entropy_by_ctx_rotation"] == pytest.approx({str(j): float(h) for j in range(4)}, abs=1e-6)
    assert c3["letter_probs"] == pytest.approx({L: 0.25 for L in "ABCD"}, abs=1e-6)
    # greedy CSC: argmax is US in every prompt except where UK is boosted (4/10 tie, first letter wins)
    assert 0.0 <= hand["greedy"]["C3"]["CSC"] <= 1.0


def test_temperature_and_letter_mass_do_not_leak(hand: dict) -> None:
    """Renormalising over letters makes metrics independent of the letter mass."""
    other = compute(_table([_item("i1", ["US", "UK", "China", "Assam"])], mass=0.3), DiscoAnalysis(n_boot=0))
    assert other["expected"]["C0"]["KL"] == pytest.approx(hand["expected"]["C0"]["KL"], abs=1e-6)
    hot = compute(_table([_item("i1", ["US", "UK", "China", "Assam"])]), DiscoAnalysis(n_boot=0, temperature=1e3))
    assert hot["expected"]["C0"]["KL"] == pytest.approx(0.0, abs=1e-4)


ITEMS = [_item("a", ["US", "UK", "China", "Assam"]), _item("b", ["Spain", "US", "Ethiopia", "Greece"]),
         _item("c", ["Assam", "Algeria", "UK", "South_Korea"])]


def test_item_weights_equal_an_explicit_resample() -> None:
    """Bootstrap weights [2, 0, 1] must give exactly the metrics of the table a, a', c."""
    table = _table(ITEMS)
    weighted = evaluate(item_sums(table, choice_probs(table.logprobs)), np.array([2.0, 0.0, 1.0]), DiscoAnalysis())
    dup = ITEMS[0].__class__(**{**ITEMS[0].__dict__, "item_id": "a2"})
    resampled = _table([ITEMS[0], dup, ITEMS[2]])
    direct = evaluate(item_sums(resampled, choice_probs(resampled.logprobs)), np.ones(3), DiscoAnalysis())
    for path in (("C0", "KL"), ("C0", "Gini"), ("C1", "CR"), ("C2", "PSI"), ("C3", "JSD"),
                 ("C3", "sample_agreement"), ("SPD_reduction",), ("C2", "SPD_compliance")):
        a, b = weighted, direct
        for key in path:
            a, b = a[key], b[key]
        assert float(a) == pytest.approx(float(b), abs=1e-9), path
    assert set(weighted["C0"]["CSD"]) == set(direct["C0"]["CSD"]) | {"Spain", "Ethiopia", "Greece"}


def test_exposure_normalisation_and_ci() -> None:
    table = _table(ITEMS)
    m = compute(table, DiscoAnalysis(n_boot=300, seed=1))
    csd = m["expected"]["C0"]["CSD"]
    assert len(csd) == 9 and sum(csd.values()) == pytest.approx(1.0)
    # Exposure normalisation: US appears in items a and b (C0 probability 4/8 and 4/9),
    # Spain only in b (3/9); the rate is selections per appearance.
    rate_us, rate_spain = (4 / 8 + 4 / 9) / 2, 3 / 9
    assert csd["US"] / csd["Spain"] == pytest.approx(rate_us / rate_spain, abs=1e-6)
    # Rates over 3 items no longer sum to 1, so SL (vs CSD) and SL_rate (vs rate) differ.
    cr_us = m["expected"]["C1"]["CR_by_culture"]["US"]
    assert m["expected"]["C1"]["SL_rate"]["US"] == pytest.approx(cr_us - rate_us, abs=1e-6)
    assert m["expected"]["C1"]["SL"]["US"] == pytest.approx(cr_us - csd["US"], abs=1e-6)
    lo, hi = m["ci95"]["expected"]["C0"]["KL"]
    assert lo <= hi
    again = compute(table, DiscoAnalysis(n_boot=300, seed=1))
    assert again["ci95"] == m["ci95"]  # seeded


def test_greedy_csc_replicates_carry_its_name() -> None:
    """Paired comparisons read the returned replicates: the greedy block names CSC there too."""
    from probe.metrics.core import replicates_of

    out = compute(_table(ITEMS), DiscoAnalysis(n_boot=20))
    box = replicates_of(out)
    assert "CSC" in out["greedy"]["C3"] and "CSC" in out["ci95"]["greedy"]["C3"]
    assert box["greedy"]["C3"]["CSC"].shape == (20,) and "sample_agreement" not in box["greedy"]["C3"]
    assert box["expected"]["C3"]["sample_agreement"].shape == (20,) and "CSC" not in box["expected"]["C3"]
