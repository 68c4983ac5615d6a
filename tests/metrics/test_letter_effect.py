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
    estimate over 40 sets of 60 groups is within 0.05 of it (0 for pure noise)."""
    order = _rotations(k)
    rng = np.random.default_rng(k)
    got = []
    for _ in range(40):
        a, c = rng.normal(0, 1, k), rng.normal(0, content_sd, (60, k))
        lc = np.concatenate([_log_softmax(a[None] + cg[order] + rng.normal(0, 1, (k, k))) for cg in c])
        ss = split_sums(lc, np.tile(order, (60, 1)), np.repeat(np.arange(60), k), np.zeros(60 * k, int), 1)
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


def test_the_analysis_reports_the_letter_effect_of_a_planted_table() -> None:
    """Exact letter + content log-probs over all rotations (no noise): the mass moved is the mean
    total variation between softmax(a + c[order]) and softmax(c[order]) computed here directly,
    the content is fully reliable (no residual), nothing is floored."""
    from probe.metrics.letters import LetterOptions, analyse
    from probe.results.scores import ScoreTable
    from probe.types import Design

    k, rng = 4, np.random.default_rng(7)
    order = _rotations(k)
    a = np.log(np.array([0.1, 0.2, 0.5, 0.2]))
    contents = rng.normal(size=(5, k))
    lp = np.concatenate([_log_softmax(a[None] + c[order]) for c in contents])
    orders = np.tile(order, (5, 1))
    n = len(lp)
    table = ScoreTable(prompt_id=np.arange(n), item_id=np.repeat([f"i{i}" for i in range(5)], k).astype(object),
                       design={"condition": np.array(["C0"] * n, object)},
                       groups=np.array([[f"g{o}" for o in row] for row in orders], object), logprobs=lp,
                       greedy_valid=np.ones(n, bool), order=orders)
    effect = analyse(table, Design(condition="condition"), LetterOptions(n_boot=0)).blocks["letter_effect"]["C0"]
    p, q = np.exp(lp), np.concatenate([np.exp(_log_softmax(c[order])) for c in contents])
    assert effect["mass_moved"] == pytest.approx(0.5 * np.abs(p - q).sum(axis=1).mean(), abs=1e-9)
    assert effect["content_reliability"] == pytest.approx(1.0, abs=1e-9) and effect["n_floored"] == 0
