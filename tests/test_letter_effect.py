"""The letter's effect on the probability scale and the reliability of the debiased reading
(`probe.metrics.letter_effect`), on planted letter × content tables; and groups touching the
log-prob floor are left out of the split and counted (`probe.metrics.letters.split_sums`)."""

from __future__ import annotations

import numpy as np
import pytest

from probe.metrics.letter_effect import content_reliability, mass_moved
from probe.metrics.letters import LOG_FLOOR, split_sums


def _rotations(k: int) -> np.ndarray:
    """`[rotation, letter]` the option at each letter under the K cyclic rotations."""
    return np.array([[(j + r) % k for j in range(k)] for r in range(k)])


def _log_softmax(x: np.ndarray) -> np.ndarray:
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_mass_moved_by_hand() -> None:
    """K = 2, content (0, 0) and letter A twice as likely: p = (2/3, 1/3) in both rotations, q = (½, ½):
    total variation ½ (|2/3 − ½| + |1/3 − ½|) = 1/6; no letter effect moves nothing."""
    lc = np.log(np.array([[2 / 3, 1 / 3], [2 / 3, 1 / 3]]))
    assert mass_moved(lc, np.full((2, 2), 0.5)) == pytest.approx(1 / 6)
    assert mass_moved(np.log(np.full((2, 2), 0.5)), np.full((2, 2), 0.5)) == 0.0
    assert np.isnan(mass_moved(np.zeros((0, 2)), np.zeros((0, 2))))


@pytest.mark.parametrize("k", [3, 4, 10])
@pytest.mark.parametrize("content_sd", [0.0, 0.5, 1.0])
def test_content_reliability_recovers_the_planted_signal_share(k: int, content_sd: float) -> None:
    """`log p_r(j) = a_j + c_g(o_rj) + e_rj`, letter effects a of sd 1, content c of sd s, noise of
    sd 1: the debiased content (the mean of K rotations) has reliability s² / (s² + 1/K); the
    estimate over 40 sets of 30 groups is within 0.05 of it (0 for pure noise)."""
    order = _rotations(k)
    rng = np.random.default_rng(k)
    got = []
    for _ in range(40):
        a, c = rng.normal(0, 1, k), rng.normal(0, content_sd, (30, k))
        lc = np.concatenate([_log_softmax(a[None] + cg[order] + rng.normal(0, 1, (k, k))) for cg in c])
        ss = split_sums(lc, np.tile(order, (30, 1)), np.repeat(np.arange(30), k), np.zeros(30 * k, int), 1)
        got.append(content_reliability(float(ss.content.sum()), float(ss.residual.sum()), k))
    assert np.mean(got) == pytest.approx(content_sd ** 2 / (content_sd ** 2 + 1 / k), abs=0.05)


def test_content_reliability_is_undefined_without_residual_degrees_of_freedom() -> None:
    assert np.isnan(content_reliability(1.0, 0.0, 2)) and np.isnan(content_reliability(0.0, 1.0, 4))


def test_groups_touching_the_floor_are_left_out_of_the_split_and_counted() -> None:
    """Two complete groups of one item; the second has a letter at the floor in one rotation: its
    sums of squares would dwarf the first's, so it is skipped and counted."""
    order = _rotations(4)
    clean = _log_softmax(np.array([0.3, 0, -0.2, 0.1])[None] + np.array([0.5, 0, 0, -0.5])[order])
    floored = clean.copy()
    floored[1, 2] = LOG_FLOOR
    both = split_sums(np.concatenate([clean, floored]), np.tile(order, (2, 1)), np.repeat([0, 1], 4),
                      np.zeros(8, int), 1)
    alone = split_sums(clean, order, np.zeros(4, int), np.zeros(4, int), 1)
    assert both.n_floored == 1 and alone.n_floored == 0
    assert both.content == pytest.approx(alone.content) and both.residual == pytest.approx(alone.residual)
    assert both.n_groups[0] == 1
