"""Calibration of the headline inference (`probe.metrics.preference`) by simulation: DiSCo-format
worlds (`probe.metrics.preference_calibration`: 48 items over 8 cultures, C0, a strong letter prior,
item × option content) drawn without a model and run through DiSCo's own `compute`. In the null
world the test of no preference rejects at most as often as its level allows and the KL interval
covers the true 0; with a planted preference (population KL 0.038) the test has power and the
interval covers the population KL. Also the pieces by hand: the within-unit exchange, the floor
interval, the enclosure, and the report's rule (no culture named without a rejection).
The large numbers (20 replicates through `probe analyze`) are scripts/headline_calibration.py's."""

from __future__ import annotations

import numpy as np
import pytest

from probe.benches.disco.conclusion import opening
from probe.benches.disco.metrics import DiscoAnalysis, compute
from probe.metrics.core import kl_to_uniform
from probe.metrics.preference import enclose, exchanged_sums, floor_interval
from probe.metrics.preference_calibration import LetterWorld, design, draw_logprobs, population_shares
from probe.results.scores import ScoreTable

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

CULTURES = ["Algeria", "Assam", "China", "Ethiopia", "Greece", "Indonesia", "South_Korea", "Spain"]
NULL = LetterWorld()
PLANTED = LetterWorld(preference=(0.7, 0.47, 0.23, 0.0, 0.0, -0.23, -0.47, -0.7))
REPLICATES = 30
OPTS = DiscoAnalysis(n_boot=200, high=("China", "South_Korea"), low=("Ethiopia", "Assam"))


def table(world: LetterWorld, rng: np.random.Generator) -> ScoreTable:
    d = design(world)
    n = len(d.item)
    lp = draw_logprobs(world, d, rng)
    return ScoreTable(prompt_id=np.arange(n), item_id=np.array([f"item-{i:02d}" for i in d.item]),
                      design={"condition": np.full(n, "C0", dtype=object), "target": np.full(n, None, dtype=object),
                              "rotation": d.rotation, "ctx_rotation": np.full(n, -1)},
                      groups=np.array(CULTURES, dtype=object)[d.group], logprobs=lp, greedy_valid=np.ones(n, bool))


def tally(world: LetterWorld, seed: int) -> dict[str, float]:
    truth = float(kl_to_uniform(population_shares(world))) if world.preference else 0.0
    rng = np.random.default_rng(seed)
    out = {"rejects": 0, "covers": 0, "named": 0}
    for r in range(REPLICATES):
        m = compute(table(world, rng), OPTS)
        lo, hi = m["ci95"]["expected"]["C0"]["KL"]
        out["covers"] += lo <= truth <= hi
        out["rejects"] += m["p"]["expected"]["C0"]["KL"] < 0.05
        said = opening({**m, "debiased": None})[0]
        out["named"] += any(c in said for c in CULTURES)
    return {k: v / REPLICATES for k, v in out.items()}


@pytest.fixture(scope="module")
def null() -> dict[str, float]:
    return tally(NULL, 1)


@pytest.fixture(scope="module")
def planted() -> dict[str, float]:
    return tally(PLANTED, 2)


def test_the_planted_world_is_what_the_issue_asks_for() -> None:
    assert float(kl_to_uniform(population_shares(PLANTED))) == pytest.approx(0.038, abs=0.002)
    assert float(kl_to_uniform(population_shares(NULL))) < 1e-5


def test_no_preference_is_rarely_rejected_and_no_culture_is_named(null: dict[str, float]) -> None:
    # 30 replicates at size 0.05: 4 or more rejections has probability 0.06 under a valid test
    assert null["rejects"] <= 4 / REPLICATES, null
    assert null["named"] == null["rejects"], null  # a culture is named exactly when the test rejects
    assert null["covers"] >= 0.9, null


def test_a_planted_preference_is_found_and_covered(planted: dict[str, float]) -> None:
    assert planted["rejects"] >= 0.8, planted
    assert planted["covers"] >= 0.8, planted


def test_the_exchange_permutes_each_units_shown_groups_only() -> None:
    sel = np.array([[1.0, 2.0, 3.0, 0.0], [0.0, 5.0, 6.0, 7.0]])
    app = (sel > 0).astype(float)
    one, shown = exchanged_sums(sel[:1], app[:1], 50, np.random.default_rng(0))
    assert (one[:, 3] == 0).all() and (shown == app[:1]).all()
    assert sorted({tuple(row) for row in one}) == sorted({(1, 2, 3, 0), (1, 3, 2, 0), (2, 1, 3, 0), (2, 3, 1, 0),
                                                          (3, 1, 2, 0), (3, 2, 1, 0)})
    both, _ = exchanged_sums(sel, app, 20, np.random.default_rng(1))
    assert np.allclose(both.sum(axis=1), sel.sum())


def test_the_floor_interval_reaches_zero_and_holds_both_estimates() -> None:
    """A plug-in at 0.001 whose replicates sit above it (the upward bias of a divergence): the
    percentile interval [0.00126, …] would miss the estimate; the floor interval starts at 0."""
    rep = np.random.default_rng(0).gamma(2.0, 0.0015, 1000) + 0.0012
    lo, hi = floor_interval(0.00113, rep)
    assert lo == 0.0 and hi >= 0.00113


def test_every_interval_holds_its_own_estimate_after_enclosure() -> None:
    tree = {"expected": {"a": 1.0, "b": [0.2, 0.5]}, "ci95": {"expected": {"a": [1.2, 2.0], "b": [[0.0, 0.1], [0.4, 0.6]]}}}
    out = enclose(tree)
    assert out["ci95"]["expected"] == {"a": [1.0, 2.0], "b": [[0.0, 0.2], [0.4, 0.6]]}
    assert out["expected"] == tree["expected"]


def test_equal_values_test_never_singles_out_a_uniform_model_and_finds_a_planted_one() -> None:
    """A uniform model's lifts are 0 for every country in every resample: p = 1, nothing named.
    Thirty countries with no difference: rejection in about 5% of 100 worlds; one country 0.05
    above the others (sd 0.01 of each lift): found."""
    from probe.metrics.preference import equal_values

    p, band = equal_values(np.zeros(30), np.zeros((200, 30)))
    assert p == 1.0 and (band == 0).all()
    rng = np.random.default_rng(3)
    rejects = 0
    for _ in range(100):
        common = rng.normal(0, 0.01, (200, 1))  # resampled questions move every country alike in part
        reps = common + rng.normal(0, 0.01, (200, 30))
        point = rng.normal(0, 0.01) + rng.normal(0, 0.01, 30)  # the same sampling noise as the replicates
        rejects += equal_values(point, point + reps - reps.mean(0))[0] < 0.05
    assert rejects <= 10, rejects
    point = np.r_[0.05, np.zeros(29)] + rng.normal(0, 0.01, 30)
    assert equal_values(point, point + rng.normal(0, 0.01, (200, 30)))[0] < 0.05


CLUSTERS = ["anglo", "eastern_europe", "latin-america", "latin_europe", "confucian_asia",
            "nordic_europe", "sub-saharan_africa", "southern-asia", "germanic_europe", "middle_east"]


@pytest.mark.parametrize("planted", [False, True])
def test_ccd_bench_no_preference_holds_its_size_and_finds_a_planted_one(planted: bool) -> None:
    """CCD-Bench's cyclic design (10 clusters, 10 rotations, 30 items) through its own `compute`:
    no cluster preference → the test rejects rarely, the Gini interval covers 0; a planted one →
    found, and its interval covers the population Gini."""
    from probe.benches.ccd.metrics import compute as ccd_compute
    from probe.metrics.core import AnalysisOptions, gini

    world = LetterWorld(n_items=30, n_groups=10, k=10, letter_prior=tuple(np.linspace(0.8, -0.8, 10)),
                        preference=tuple(np.linspace(0.5, -0.5, 10)) if planted else ())
    truth = float(gini(population_shares(world))) if planted else 0.0
    rng, rejects, covers, n = np.random.default_rng(4 + planted), 0, 0, 12
    for _ in range(n):
        d = design(world)
        tab = ScoreTable(prompt_id=np.arange(len(d.item)), item_id=np.array([f"i{i:02d}" for i in d.item]),
                         design={"rotation": d.rotation}, groups=np.array(CLUSTERS, dtype=object)[d.group],
                         logprobs=draw_logprobs(world, d, rng), greedy_valid=np.ones(len(d.item), bool))
        m = ccd_compute(tab, AnalysisOptions(n_boot=200))
        rejects += m["p"]["expected"]["gini"] < 0.05
        lo, hi = m["ci95"]["expected"]["gini"]
        covers += lo <= truth <= hi
    assert (rejects >= 11) if planted else (rejects <= 2), rejects
    assert covers >= 10, covers
