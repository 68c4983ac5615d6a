"""Calibration of the format-robustness inference (`probe.metrics.format_calibration`): planted
worlds drawn without a model, analysed by the same `analyse` as a run. Every 95% interval holds
its true value in 90–99% of 200 replicates, the null world raises a `format…` verdict for some
group in at most 5% of them, a planted group × factor interaction is flagged for its group in at
least 80%. Also the pieces by hand: exposure-normalised shares, Holm, the noise floor."""

from __future__ import annotations

import numpy as np
import pytest

from probe.metrics.core import bootstrap_weights
from probe.metrics.factorial_shares import ShareCube, exposure_means
from probe.metrics.format_calibration import NULL, PLANTED, Tally, calibrate, draw, truth
from probe.metrics.format_inference import holm, noise_floor
from probe.metrics.variance_split import term_sums_of_squares, terms

REPLICATES = 200


@pytest.fixture(scope="module")
def null() -> Tally:
    return calibrate(NULL, n_rep=REPLICATES)


@pytest.fixture(scope="module")
def planted() -> Tally:
    return calibrate(PLANTED, n_rep=REPLICATES)


@pytest.mark.parametrize("family", ["shares", "effects", "components"])
def test_every_interval_holds_its_truth_nine_times_in_ten_or_more(null: Tally, planted: Tally, family: str) -> None:
    for tally in (null, planted):
        assert tally.n_rep == REPLICATES
        assert 0.90 <= tally.coverage(family) <= 0.99, (family, tally.coverage(family))


def test_the_null_world_rarely_raises_a_format_verdict(null: Tally) -> None:
    assert null.any_format / null.n_rep <= 0.05


def test_the_own_term_count_finds_the_moved_group_and_rarely_its_spillover(null: Tally, planted: Tally) -> None:
    """One group moved by the wording (g1 × f0, G = 4): the *In short*'s count, each group's
    log-ratio against the others' with drivers found step by step, holds g1 in at least 80% of
    replicates and another group in at most 10% (the share verdicts flag another in about 27%)."""
    assert null.own_spill / null.n_rep <= 0.05, null.own_spill
    assert planted.own_planted / planted.n_rep >= 0.8, planted.own_planted
    assert planted.own_spill / planted.n_rep <= 0.10, planted.own_spill


def test_the_spread_over_wordings_is_rarely_called_in_the_null_and_found_when_planted(null: Tally,
                                                                                      planted: Tally) -> None:
    """The headline spread sentence rests on `spread_p` (the shares' KL range over the wordings
    against a within-item shuffle): at most 5% false alarms with no wording effect. Its power
    against the planted g1 × f0 interaction is low (about 0.12: moving one group's share moves
    the KL little), and the docs say so; it is above the false-alarm rate."""
    assert null.spread / null.n_rep <= 0.05, null.spread
    assert planted.spread > 2 * max(null.spread, 1), (planted.spread, null.spread)


def test_a_planted_interaction_is_flagged_for_its_group(planted: Tally) -> None:
    assert planted.flagged[1] / planted.n_rep >= 0.8


def test_the_worlds_truth_is_what_was_planted() -> None:
    """Null: the same population shares in every wording, so no group × factor component; planted:
    group 1 higher at level 0 of f0 than at level 1, nothing else moves with f1."""
    none, some = truth(NULL), truth(PLANTED)
    assert np.abs(none.shares - none.shares[0]).max() < 2e-3 and none.components[1:].max() < 1e-5
    assert some.shares[:2, 1].min() > some.shares[2:, 1].max() + 0.1  # variants v0, v1 have f0 = l0
    assert some.components[1] > 100 * max(some.components[2], 1e-7)


def test_exposure_normalised_shares_by_hand() -> None:
    """Two items, three groups: item 0 shows A, B (0.6, 0.4), item 1 shows A, C (0.5, 0.5). Rates:
    A (0.6 + 0.5)/2, B 0.4/1, C 0.5/1 → (0.55, 0.4, 0.5)/1.45 (a plain mean would give B 0.2)."""
    shares = np.array([[[0.6, 0.4, 0.0]], [[0.5, 0.0, 0.5]]])
    shown = np.array([[1.0, 1, 0], [1, 0, 1]])
    got = exposure_means(np.ones((1, 2)), shares, shown)[0, 0]
    assert got == pytest.approx(np.array([0.55, 0.4, 0.5]) / 1.45, abs=1e-15)
    cube = ShareCube(("i0", "i1"), ("v0",), ("A", "B", "C"), shares, shown.astype(bool))
    assert cube.means()[0] == pytest.approx(got, abs=1e-15)
    # a resample that draws item 0 twice never shows C: that replicate is undefined, not C = 0
    assert np.isnan(exposure_means(np.array([[2.0, 0.0]]), shares, shown)).all()
    with pytest.raises(ValueError, match=r"item 'i0', variant 'v0', group 'C': the item does not show the group"):
        ShareCube(("i0", "i1"), ("v0",), ("A", "B", "C"), shares + np.array([0, 0, 0.1]), shown.astype(bool))


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.02, 0.04, 0.30 → ×4, ×3, ×2, ×1 = 0.04, 0.06, 0.08, 0.30, running max
    assert holm(np.array([0.04, 0.01, 0.30, 0.02])) == pytest.approx([0.08, 0.04, 0.30, 0.06])
    assert holm(np.array([0.5, 0.6])) == pytest.approx([1.0, 1.0])


def test_the_noise_floor_matches_the_bootstraps_own_inflation() -> None:
    """Independent recomputation: the expected sum of squares that resampling adds,
    `mean_b SS_T(S*_b) − SS_T(Ŝ)`, estimated with 20,000 replicates, agrees with the
    jackknife's within 10% for every term (the jackknife's variance has n − 1, the bootstrap's n:
    scaled back)."""
    shares, shown = draw(PLANTED, 1, np.random.default_rng(3))
    shares, shown = shares[0], shown[0].astype(np.float64)
    n, shape = shares.shape[0], PLANTED.levels
    floor = noise_floor(shares, shown, shape).sum(axis=0)

    def ss(means: np.ndarray) -> np.ndarray:
        d = np.moveaxis((means - 1 / means.shape[-1]).reshape(len(means), *shape, means.shape[-1]), -1, 1)
        parts = term_sums_of_squares(d, len(shape))
        return np.stack([parts[t].sum(axis=1) for t in terms(len(shape))], axis=-1)

    reps = exposure_means(bootstrap_weights(n, 20_000, 1), shares, shown)
    reps = reps[~np.isnan(reps).any(axis=(1, 2))]
    added = ss(reps).mean(axis=0) - ss(exposure_means(np.ones((1, n)), shares, shown))[0]
    assert added * n / (n - 1) == pytest.approx(floor, rel=0.1)

