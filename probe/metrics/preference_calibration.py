"""Planted worlds for the headline inference (`probe.metrics.preference`): letter log-probs drawn
without a model from a world whose population shares are known, for any forced-choice bench
that shows each item's K options under all K cyclic rotations.

A world (`LetterWorld`) has G groups; item i shows groups `i, i+1, …, i+K−1 (mod G)` as its
options 0..K−1, and every rotation r shows option `(j + r) mod K` at letter j. A prompt's letter
log-probs are `a_j + β_g + u_io + ε_rj`, renormalised to a letter mass: a letter prior `a`, a group
preference `β` (0: the null world), an item × option content effect `u` (items differ) and prompt
noise `ε`. The population value of a statistic is its value on the exposure-normalised shares of
one very large draw (`population_shares`), the Monte Carlo stand-in for infinitely many items
like these. `scripts/headline_calibration.py` and the test suite run such worlds through a
bench's own metric code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probe.probs import exposure_shares

TRUTH_ITEMS = 400_000
"""Items of the draw that stands for the population."""


@dataclass(frozen=True)
class LetterWorld:
    """A planted world (see the module docstring); logits in nats."""

    n_items: int = 48
    n_groups: int = 8
    k: int = 4
    preference: tuple[float, ...] = ()
    """Each group's logit β_g; empty: no preference (all 0)."""
    letter_prior: tuple[float, ...] = (0.9, 0.0, -0.5, 0.3)
    item_sd: float = 0.6
    noise_sd: float = 0.3
    mass: float = 0.6
    """Letter mass: the letters' total probability in the full vocabulary."""

    def beta(self) -> np.ndarray:
        """`[G]` the group logits."""
        return np.asarray(self.preference or (0.0,) * self.n_groups, dtype=np.float64)


@dataclass(frozen=True)
class Design:
    """The prompts of a world: `item [prompt]`, `rotation [prompt]`, `option [prompt, letter]`
    (the option at each letter) and `group [prompt, letter]` (its group index)."""

    item: np.ndarray
    rotation: np.ndarray
    option: np.ndarray
    group: np.ndarray


def design(world: LetterWorld, n_items: int | None = None) -> Design:
    """All K cyclic rotations of every item, prompts ordered by item then rotation."""
    n, k = world.n_items if n_items is None else n_items, world.k
    item = np.repeat(np.arange(n), k)
    rotation = np.tile(np.arange(k), n)
    option = (np.arange(k)[None, :] + rotation[:, None]) % k
    group = (item[:, None] + option) % world.n_groups
    return Design(item=item, rotation=rotation, option=option, group=group)


def draw_logprobs(world: LetterWorld, d: Design, rng: np.random.Generator) -> np.ndarray:
    """`[prompt, letter]` full-vocabulary letter log-probs of one replicate (float32, as stored)."""
    n_items = int(d.item.max()) + 1
    u = rng.normal(0.0, world.item_sd, (n_items, world.k))
    logit = (np.asarray(world.letter_prior)[None, :] + world.beta()[d.group] + u[d.item[:, None], d.option]
             + rng.normal(0.0, world.noise_sd, d.group.shape))
    logit = logit - logit.max(axis=1, keepdims=True)
    log_p = logit - np.log(np.exp(logit).sum(axis=1, keepdims=True))
    return (log_p + np.log(world.mass)).astype(np.float32)


def population_shares(world: LetterWorld, seed: int = 12345) -> np.ndarray:
    """`[G]` the population's exposure-normalised shares of the expected (T = 1) reading."""
    d = design(world, TRUTH_ITEMS)
    p = np.exp(draw_logprobs(world, d, np.random.default_rng(seed)).astype(np.float64))
    p /= p.sum(axis=1, keepdims=True)
    sel = np.bincount(d.group.ravel(), weights=p.ravel(), minlength=world.n_groups)
    app = np.bincount(d.group.ravel(), minlength=world.n_groups).astype(np.float64)
    return exposure_shares(sel, app)
