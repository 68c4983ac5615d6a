"""CCD-Bench metrics against hand-computed values and properties.

The hand example is two items with one ordering each (as under the Latin-square design):
item "a" (Work) shows the clusters in canonical order at A..J, item "b" (Family) in reverse
order. The fake model puts .25 on anglo (A) and .75 on nordic_europe (F) for "a", .75 on
middle_east (A) and .25 on nordic_europe (E) for "b". Greedy picks nordic for "a" and
middle_east for "b". Every number below is worked out by hand from that; see the comments.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from probe.benches.ccd.data import CLUSTERS
from probe.benches.ccd.metrics import compute, evaluate, item_sums
from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions, choice_probs, symmetric_kl
from probe.results.scores import ScoreTable

NORDIC, ME, ANGLO = "nordic_europe", "middle_east", "anglo"


def _table(prompts: list[tuple[str, str, list[str], list[float]]], mass: float = 0.8) -> ScoreTable:
    """Prompts as (item_id, domain, clusters at A..J, choice probabilities at A..J)."""
    p = np.array([pr[3] for pr in prompts], dtype=np.float64)
    with np.errstate(divide="ignore"):
        lp = np.log(mass * p)  # letter mass `mass`; a 0 becomes -inf, which softmax maps back to 0
    n = len(prompts)
    return ScoreTable(
        prompt_id=np.arange(n),
        item_id=np.array([pr[0] for pr in prompts], dtype=object),
        design={"condition": np.array(["latin_square"] * n, dtype=object), "target": np.array([None] * n, dtype=object),
                "rotation": np.zeros(n, dtype=np.int64), "ctx_rotation": np.full(n, -1)},
        groups=np.array([pr[2] for pr in prompts], dtype=object),
        logprobs=lp.astype(np.float32),
        greedy_valid=np.ones(n, dtype=bool),
        category=np.array([pr[1] for pr in prompts], dtype=object),
    )


def _onehots(**at: float) -> list[float]:
    p = [0.0] * 10
    for letter, v in at.items():
        p["ABCDEFGHIJ".index(letter)] = v
    return p


HAND = [("a", "Work", list(CLUSTERS), _onehots(A=0.25, F=0.75)),
        ("b", "Family", list(reversed(CLUSTERS)), _onehots(A=0.75, E=0.25))]


def _cyclic(n_items: int, lp_fn, domains=("Arts", "Work")) -> ScoreTable:
    """All 10 rotations per item: rotation r shows cluster (ℓ + r) mod 10 at letter ℓ."""
    rows = []
    for i in range(n_items):
        for r in range(10):
            groups = [CLUSTERS[(j + r) % 10] for j in range(10)]
            rows.append((f"i{i}", domains[i % len(domains)], groups, lp_fn(groups)))
    return _table(rows)


@pytest.fixture(scope="module")
def hand() -> dict:
    return compute(_table(HAND), AnalysisOptions(n_boot=0))


def test_keys_are_the_public_names(hand: dict) -> None:
    assert list(hand["expected"]) == ["shares", "position_shares", "position_chi2", "position_V",
                                      "cluster_position_V", "mean_cluster_position_V", "domain_chi2",
                                      "domain_residuals", "entropy_bits", "gini"]
    assert list(hand["expected"]["shares"]) == list(CLUSTERS)
    assert list(hand["expected"]["domain_residuals"]) == ["Family", "Work"]  # published domain order
    assert hand["ci95"] == {}  # n_boot = 0


def test_shares_entropy_gini_hand(hand: dict) -> None:
    e = hand["expected"]
    # f = anglo .25, nordic .75 + .25, middle_east .75; N = 2 prompts
    shares = {c: 0.0 for c in CLUSTERS} | {ANGLO: 0.125, NORDIC: 0.5, ME: 0.375}
    assert e["shares"] == pytest.approx(shares, abs=1e-6)
    # .125·3 + .5·1 + .375·log2(8/3)
    assert e["entropy_bits"] == pytest.approx(0.375 + 0.5 + 0.375 * math.log2(8 / 3), abs=1e-6)
    # ascending f: seven 0s, .25, .75, 1 with weights 3, 2, 1: Σ = 3.25; (11 − 2·3.25/2)/10
    assert e["gini"] == pytest.approx(0.775, abs=1e-6)


def test_position_hand(hand: dict) -> None:
    e = hand["expected"]
    # O: A = .25 + .75 = 1, E = .25, F = .75, else 0; N = 2
    assert e["position_shares"] == pytest.approx(_onehots(A=0.5, E=0.125, F=0.375), abs=1e-6)
    # E = .2: .8²/.2 + .05²/.2 + .55²/.2 + 7·.2²/.2 = 3.2 + .0125 + 1.5125 + 1.4
    assert e["position_chi2"] == pytest.approx(6.125, abs=1e-5)
    assert e["position_V"] == pytest.approx(7 / 12, abs=1e-6)  # sqrt(6.125/18) = sqrt(49/144)


def test_cluster_position_hand(hand: dict) -> None:
    v = hand["expected"]["cluster_position_V"]
    # Each cluster is shown at two positions (once each): S_c uniform over those, k_c = 2, so
    # V_c = |O_1 − O_2| / N_c. anglo: .25 at A vs 0 at J → 1; nordic: .75 at F vs .25 at E → .5;
    # middle_east: .75 at A (b) vs 0 at J (a) → 1; the seven never-chosen clusters are NaN.
    assert v[ANGLO] == pytest.approx(1.0) and v[NORDIC] == pytest.approx(0.5) and v[ME] == pytest.approx(1.0)
    assert all(math.isnan(v[c]) for c in CLUSTERS if c not in (ANGLO, NORDIC, ME))
    assert hand["expected"]["mean_cluster_position_V"] == pytest.approx(2.5 / 3)


def test_domain_hand(hand: dict) -> None:
    e = hand["expected"]
    # T: Work = (anglo .25, nordic .75), Family = (nordic .25, middle_east .75); rows 1, N = 2,
    # so E = col/2 = (anglo .125, nordic .5, middle_east .375) in both rows.
    r = e["domain_residuals"]
    s125, s5, s375 = math.sqrt(0.125), math.sqrt(0.5), math.sqrt(0.375)
    assert r["Work"][ANGLO] == pytest.approx(0.125 / s125, abs=1e-6)
    assert r["Work"][NORDIC] == pytest.approx(0.25 / s5, abs=1e-6)
    assert r["Work"][ME] == pytest.approx(-s375, abs=1e-6)
    assert r["Family"][ANGLO] == pytest.approx(-s125, abs=1e-6)
    assert r["Family"][NORDIC] == pytest.approx(-0.25 / s5, abs=1e-6)
    assert r["Family"][ME] == pytest.approx(0.375 / s375, abs=1e-6)
    assert math.isnan(r["Work"]["latin_europe"])  # E = 0: a column nobody chose
    assert e["domain_chi2"] == pytest.approx(2 * (0.125 + 0.125 + 0.375), abs=1e-6)


def test_greedy_hand(hand: dict) -> None:
    g = hand["greedy"]  # a → F (nordic), b → A (middle_east)
    assert g["shares"] == {c: 0.0 for c in CLUSTERS} | {NORDIC: 0.5, ME: 0.5}
    assert g["entropy_bits"] == pytest.approx(1.0)
    assert g["gini"] == pytest.approx(0.8)  # ascending 0×8, 1, 1: (11 − 2·3/2)/10
    assert g["position_shares"] == pytest.approx(_onehots(A=0.5, F=0.5))
    assert g["position_chi2"] == pytest.approx(8.0)  # 2·.8²/.2 + 8·.2
    assert g["position_V"] == pytest.approx(2 / 3)  # sqrt(8/18)
    assert math.isnan(g["cluster_position_V"][ANGLO])  # never chosen
    assert g["cluster_position_V"][NORDIC] == pytest.approx(1.0) and g["mean_cluster_position_V"] == pytest.approx(1.0)
    h = math.sqrt(0.5)  # E = .5 in the nordic and middle_east columns
    work = g["domain_residuals"]["Work"]
    assert work[NORDIC] == pytest.approx(h) and work[ME] == pytest.approx(-h)
    assert g["domain_chi2"] == pytest.approx(2.0)


def test_temperature_and_letter_mass() -> None:
    hot = compute(_table(HAND, mass=0.3), AnalysisOptions(n_boot=0, temperature=0.5))
    # T = .5 squares the odds in "a": 1:9 → anglo .1, so its share is .1/2
    assert hot["expected"]["shares"][ANGLO] == pytest.approx(0.05, abs=1e-6)


def test_uniform_choices_are_unbiased() -> None:
    m = compute(_cyclic(3, lambda g: [0.1] * 10), AnalysisOptions(n_boot=0))["expected"]
    assert m["shares"] == pytest.approx({c: 0.1 for c in CLUSTERS})
    assert m["position_V"] == pytest.approx(0.0, abs=1e-6)
    assert m["mean_cluster_position_V"] == pytest.approx(0.0, abs=1e-6)
    assert m["entropy_bits"] == pytest.approx(math.log2(10)) and m["gini"] == pytest.approx(0.0, abs=1e-9)
    assert m["domain_chi2"] == pytest.approx(0.0, abs=1e-9)


def test_unbalanced_design_uses_exposure() -> None:
    """A position-indifferent model has V_c = 0 even when c is shown unevenly across positions:
    O_c[ℓ] = .1·S_c[ℓ] is exactly E_c[ℓ]. A uniform expectation N_c/10 would report bias."""
    rng = np.random.default_rng(0)
    rows = [(f"i{i}", "Arts", list(np.array(CLUSTERS)[rng.permutation(10)]), [0.1] * 10) for i in range(7)]
    m = compute(_table(rows), AnalysisOptions(n_boot=0))["expected"]
    assert m["cluster_position_V"] == pytest.approx({c: 0.0 for c in CLUSTERS}, abs=1e-6)
    assert m["position_V"] == pytest.approx(0.0, abs=1e-6)


def test_always_letter_a_under_cyclic() -> None:
    """Choosing A every time: O = (N, 0, …, 0) against N/10 with N = 2 items (χ² counts each item
    once, not its 10 prompts), so χ² = (.9N)²/(.1N) + 9·.1N = 9N = N(k − 1) and V = 1; each
    cluster is at A in one rotation per item, so shares stay uniform and every V_c is 1 too."""
    t = _cyclic(2, lambda g: _onehots(A=0.99, B=0.01))
    for flavour in ("expected", "greedy"):
        m = compute(t, AnalysisOptions(n_boot=0))[flavour]
        assert m["shares"] == pytest.approx({c: 0.1 for c in CLUSTERS})
        assert m["entropy_bits"] == pytest.approx(math.log2(10)) and m["gini"] == pytest.approx(0.0, abs=1e-9)
    g = compute(t, AnalysisOptions(n_boot=0))["greedy"]
    assert g["position_chi2"] == pytest.approx(9 * 2) and g["position_V"] == pytest.approx(1.0)
    assert g["cluster_position_V"] == pytest.approx({c: 1.0 for c in CLUSTERS})


def test_cyclic_and_latin_square_chi2_share_one_scale() -> None:
    """The same per-item choices give the same χ² whatever the design: each item counts once.
    Always A: cyclic (10 prompts per item) and one ordering per item both give χ² = 9·items.
    Each item leaning wholly to one cluster (by domain) in both designs: the domain table and
    its residuals agree too (per prompt, cyclic counts were 10× and residuals √10× larger)."""
    n = 6
    always_a = _cyclic(n, lambda g: _onehots(A=1.0))
    one = _table([(f"i{i}", ("Arts", "Work")[i % 2], list(CLUSTERS), _onehots(A=1.0)) for i in range(n)])
    for flavour in ("expected", "greedy"):
        cyc, lat = compute(always_a, AnalysisOptions(n_boot=0))[flavour], compute(one, AnalysisOptions(n_boot=0))[flavour]
        assert cyc["position_chi2"] == pytest.approx(lat["position_chi2"]) == pytest.approx(9 * n)

    lean = [ANGLO if i % 2 else NORDIC for i in range(n)]  # Work items lean anglo, Arts nordic
    cyc_rows, lat_rows = [], []
    for i in range(n):
        for r in range(10):
            groups = [CLUSTERS[(j + r) % 10] for j in range(10)]
            cyc_rows.append((f"i{i}", ("Arts", "Work")[i % 2], groups, [1.0 if c == lean[i] else 0.0 for c in groups]))
        lat_rows.append((f"i{i}", ("Arts", "Work")[i % 2], list(CLUSTERS),
                         [1.0 if c == lean[i] else 0.0 for c in CLUSTERS]))
    cyc = compute(_table(cyc_rows), AnalysisOptions(n_boot=0))["expected"]
    lat = compute(_table(lat_rows), AnalysisOptions(n_boot=0))["expected"]
    # 3 Arts items all nordic, 3 Work items all anglo: a 2×2 perfect association, χ² = N = 6
    assert cyc["domain_chi2"] == pytest.approx(lat["domain_chi2"]) == pytest.approx(float(n))
    assert cyc["domain_residuals"]["Work"][ANGLO] == pytest.approx(lat["domain_residuals"]["Work"][ANGLO])


def _leaves(tree: Any, path: tuple = ()) -> dict[tuple, Any]:
    """Flatten nested dicts and lists to {path: leaf}; a CI's [lo, hi] becomes paths (…, 0), (…, 1)."""
    if isinstance(tree, (dict, list)):
        items = tree.items() if isinstance(tree, dict) else enumerate(tree)
        return {k: v for key, sub in items for k, v in _leaves(sub, path + (key,)).items()}
    return {path: tree}


def _random_rows(ids: list[str], seed: int) -> list[tuple[str, str, list[str], list[float]]]:
    rng = np.random.default_rng(seed)
    out = []
    for n, item in enumerate(ids):
        for _ in range(2):  # two orderings per item
            p = rng.dirichlet(np.ones(10))
            out.append((item, ("Arts", "Work", "Family")[n], list(np.array(CLUSTERS)[rng.permutation(10)]), list(p)))
    return out


def test_item_weights_equal_an_explicit_resample() -> None:
    """Bootstrap weights [2, 0, 1] must give exactly the metrics of the table a, a', c."""
    rows = _random_rows(["a", "b", "c"], seed=5)
    table = _table(rows)
    weighted = evaluate(item_sums(table, choice_probs(table.logprobs)), np.array([2.0, 0.0, 1.0]), AnalysisOptions())
    resampled = _table(rows[:2] + [("a2", *r[1:]) for r in rows[:2]] + rows[4:])
    direct = evaluate(item_sums(resampled, choice_probs(resampled.logprobs)), np.ones(3), AnalysisOptions())
    lw, ld = _leaves(weighted), _leaves(direct)
    for path, value in ld.items():
        assert float(lw[path]) == pytest.approx(float(value), abs=1e-9, nan_ok=True), path
    # b's domain (Work) is absent from the resample: its row has E = 0, residuals NaN
    assert set(lw) - set(ld) == {("domain_residuals", "Work", c) for c in CLUSTERS}
    assert all(math.isnan(float(lw["domain_residuals", "Work", c])) for c in CLUSTERS)


def test_ci_tree_mirrors_point_tree() -> None:
    table = _table(_random_rows(["a", "b", "c"], seed=1))
    m = compute(table, AnalysisOptions(n_boot=200, seed=3))
    for flavour in ("expected", "greedy"):
        point, ci = _leaves(m[flavour]), _leaves(m["ci95"][flavour])
        assert set(ci) == {path + (end,) for path in point for end in (0, 1)}
        assert len(m["ci95"][flavour]["position_shares"]) == 10
        for path, value in point.items():
            lo, hi = ci[path + (0,)], ci[path + (1,)]
            assert isinstance(value, float) and isinstance(lo, float) and isinstance(hi, float)
            assert (math.isnan(lo) and math.isnan(hi)) or lo <= hi, path
    # seeded; assert_equal recurses and counts NaN == NaN (a never-chosen cluster's V_c)
    np.testing.assert_equal(compute(table, AnalysisOptions(n_boot=200, seed=3))["ci95"], m["ci95"])


def test_bad_input_is_named() -> None:
    bad = _table([("a", "Work", ["atlantis"] + list(CLUSTERS[1:]), [0.1] * 10)])
    with pytest.raises(ProbeInputError, match="atlantis"):
        compute(bad, AnalysisOptions(n_boot=0))
    mixed = _table(HAND)
    mixed.category[1] = None
    with pytest.raises(ProbeInputError, match="category"):
        compute(mixed, AnalysisOptions(n_boot=0))


def test_symmetric_kl() -> None:
    p, q = {"a": 0.5, "b": 0.5}, {"a": 0.9, "b": 0.1}
    # KL(p‖q) = .5 ln(.5/.9) + .5 ln(.5/.1) = .510826; KL(q‖p) = .9 ln 1.8 + .1 ln .2 = .368064;
    # CCD-Bench eq. 5 takes half their sum.
    assert symmetric_kl(p, q) == pytest.approx(0.5 * (0.5108256 + 0.3680642), abs=1e-6)
    assert symmetric_kl(q, p) == pytest.approx(symmetric_kl(p, q))
    assert symmetric_kl(p, dict(p)) == pytest.approx(0.0, abs=1e-12)
    one_sided = symmetric_kl({"a": 1.0}, {"a": 0.5, "b": 0.5})  # missing key = 0, eps keeps it finite
    assert math.isfinite(one_sided) and one_sided > 1.0
