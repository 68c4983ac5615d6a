"""The inputs of the format-robustness analysis, validated where they enter: per-item selection
shares of each group under each prompt variant (`ShareCube`), and the variants' factor levels, a
balanced full factorial (`Factorial`).

Every problem is a `FactorialError` — a `ValueError` and a `ProbeInputError` — naming the
variant, item, group, factor or level at fault, with what was expected and what was found.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np
import pandas as pd

from probe.errors import ProbeInputError
from probe.probs import exposure_shares

SUM_TOLERANCE = 1e-6
"""How far an item's shares over the groups may sum from 1 under one variant (rounding in stored
probabilities); within it they are renormalised, beyond it the table is refused."""


class FactorialError(ProbeInputError, ValueError):
    """A share table or variant design the analysis cannot use (a `ValueError` for library callers,
    a `ProbeInputError` for the command line's one-line message)."""


@dataclass(frozen=True)
class ShareCube:
    """Selection shares `shares[item, variant, group]`: under each variant, each item's
    distribution over the groups (its probability mass on each group's options; 0 for a group
    the item does not show), and which groups each item shows (`shown`). A variant × group share
    is exposure-normalised (`exposure_means`): the mean over the items that show the group.

    The analysis is bench-neutral: a "group" is whatever the bench's shares are over (cultures,
    clusters, countries), an "item" the unit the bootstrap resamples."""

    items: tuple[str, ...]
    variants: tuple[str, ...]
    groups: tuple[str, ...]
    shares: np.ndarray
    """`[item, variant, group]` float64; each `[item, variant, :]` sums to 1."""
    shown: np.ndarray | None = None
    """`[item, group]` bool: whether the item shows the group (None: every item shows every group).
    A group an item does not show must have share 0 there."""

    def __post_init__(self) -> None:
        expected = (len(self.items), len(self.variants), len(self.groups))
        if self.shares.shape != expected:
            raise FactorialError(f"shares: expected shape (items, variants, groups) = {expected}, got {self.shares.shape}")
        if self.shown is not None:
            _check_shown(self)
        for name, labels in (("item", self.items), ("variant", self.variants), ("group", self.groups)):
            if len(set(labels)) != len(labels):
                raise FactorialError(f"{name} names repeat: {sorted({x for x in labels if labels.count(x) > 1})}")
        if len(self.groups) < 2 or not self.items:
            raise FactorialError(f"shares need ≥ 2 groups and ≥ 1 item, got {len(self.groups)} groups and "
                                 f"{len(self.items)} items")
        missing = np.argwhere(~np.isfinite(self.shares))
        if len(missing):
            i, v, g = missing[0]
            raise FactorialError(f"missing cell: item {self.items[i]!r}, variant {self.variants[v]!r}, group "
                                 f"{self.groups[g]!r} has no finite share ({len(missing)} such cells)")
        if (self.shares < 0).any():
            i, v, g = np.argwhere(self.shares < 0)[0]
            raise FactorialError(f"item {self.items[i]!r}, variant {self.variants[v]!r}, group {self.groups[g]!r}: "
                                 f"expected a share ≥ 0, got {self.shares[i, v, g]!r}")
        sums = self.shares.sum(axis=-1)
        off = np.argwhere(np.abs(sums - 1) > SUM_TOLERANCE)
        if len(off):
            i, v = off[0]
            raise FactorialError(f"variant {self.variants[v]!r}, item {self.items[i]!r}: the group shares sum to "
                                 f"{sums[i, v]:.6g}, expected 1 (each item's shares are a distribution over the "
                                 f"groups; {len(off)} (item, variant) pairs are off)")

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, item: str = "item_id", variant: str = "variant", group: str = "group",
                   share: str = "share", shown: str | None = None) -> ShareCube:
        """The cube of a long table, one row per (item, variant, group); items, variants and groups
        keep their order of first appearance. A repeated or absent (item, variant, group) is refused.
        `shown` names a bool column (whether the item shows the group; an item shows a group when
        any of its rows says so); None: every item shows every group."""
        absent = [c for c in (item, variant, group, share) if c not in frame.columns]
        if absent:
            raise FactorialError(f"share table: expected columns {[item, variant, group, share]}, missing {absent}")
        keys = frame[[item, variant, group]].astype(str)
        repeated = keys.duplicated(keep=False)
        if repeated.any():
            first = keys[repeated].iloc[0].tolist()
            raise FactorialError(f"share table: (item, variant, group) = {tuple(first)} appears "
                                 f"{int((keys == first).all(axis=1).sum())} times, expected once")
        axes = [tuple(pd.unique(keys[c])) for c in (item, variant, group)]
        cube = np.full(tuple(len(a) for a in axes), np.nan)
        index = [pd.Index(a).get_indexer(keys[c]) for a, c in zip(axes, (item, variant, group))]
        cube[tuple(index)] = frame[share].to_numpy(dtype=np.float64)
        if shown is None:
            return cls(*axes, shares=cube)
        if shown not in frame.columns:
            raise FactorialError(f"share table: expected a column {shown!r} (whether the item shows the group)")
        seen = np.zeros((len(axes[0]), len(axes[2])), dtype=bool)
        np.logical_or.at(seen, (index[0], index[2]), frame[shown].to_numpy(dtype=bool))
        return cls(*axes, shares=cube, shown=seen)

    def only(self, variants: Sequence[str]) -> ShareCube:
        """The cube of these variants alone (in this order)."""
        index = [self.variants.index(v) for v in variants]
        return ShareCube(self.items, tuple(variants), self.groups, self.shares[:, index, :], self.shown)

    def exposure(self) -> np.ndarray:
        """`[item, group]` float 1/0: whether each item shows each group."""
        if self.shown is None:
            return np.ones((len(self.items), len(self.groups)))
        return np.asarray(self.shown, dtype=np.float64)

    def means(self) -> np.ndarray:
        """`[variant, group]` exposure-normalised shares (each row sums to 1)."""
        return exposure_means(np.ones((1, len(self.items))), self.shares, self.exposure())[0]


def _check_shown(cube: ShareCube) -> None:
    """`shown` has shape `[item, group]`, every group is shown by some item, and a group an item
    does not show has share 0 there."""
    shown = np.asarray(cube.shown)
    expected = (len(cube.items), len(cube.groups))
    if shown.shape != expected:
        raise FactorialError(f"shown: expected shape (items, groups) = {expected}, got {shown.shape}")
    never = np.nonzero(~shown.astype(bool).any(axis=0))[0]
    if len(never):
        raise FactorialError(f"group {cube.groups[never[0]]!r} is shown by no item: expected every group shown "
                             f"at least once ({len(never)} such groups)")
    hidden = np.argwhere((cube.shares > 0) & ~shown.astype(bool)[:, None, :])
    if len(hidden):
        i, v, g = hidden[0]
        raise FactorialError(f"item {cube.items[i]!r}, variant {cube.variants[v]!r}, group {cube.groups[g]!r}: the "
                             f"item does not show the group, expected share 0, got {cube.shares[i, v, g]!r}")


def exposure_means(weights: np.ndarray, shares: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """Exposure-normalised variant × group shares of weighted items: `weights [B, item]` (bootstrap
    counts, or ones), `shares [item, variant, group]`, `shown [item, group]` → `[B, variant, group]`.

    `S[v, g] ∝ Σ_i w_i s[i, v, g] / Σ_i w_i shown[i, g]`, renormalised over g (the CSD's rule): a
    group is compared only with the items that show it, so an item resample that happens to show
    a group less often does not read as a lower preference. A replicate in which some group is
    never shown has NaN shares (its interval leaves it out)."""
    den = weights @ shown
    out = exposure_shares(np.einsum("bi,ivg->bvg", weights, shares), den[:, None, :])
    out[(den <= 0).any(axis=-1)] = np.nan
    return out


@dataclass(frozen=True)
class Factorial:
    """Each variant's level of each factor: a balanced full factorial, every combination of the
    factors' levels exactly once. Level 0 of each factor is listed first (the protocol's)."""

    factors: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    """Per factor, its level names in order."""
    variants: tuple[str, ...]
    """The variant names in factorial order: the last factor's level changes fastest."""

    @classmethod
    def of(cls, design: Mapping[str, Mapping[str, str]], levels: Mapping[str, Sequence[str]] | None = None) -> Factorial:
        """The factorial of `{variant: {factor: level}}`. `levels` orders each factor's levels;
        without it they keep their order of first appearance (so the first variant's levels —
        the protocol's — come first). Refused: no variant, variants naming different factors, a
        level outside `levels`, two variants with the same levels, a combination no variant has."""
        if not design:
            raise FactorialError("the design names no variant")
        names = list(design)
        factors = tuple(design[names[0]])
        for v in names:
            if set(design[v]) != set(factors):
                raise FactorialError(f"variant {v!r} names factors {sorted(design[v])}, variant {names[0]!r} names "
                                     f"{sorted(factors)}: every variant needs a level of every factor")
        order = _level_order(design, factors, levels)
        seen: dict[tuple[str, ...], str] = {}
        for v in names:
            cell = tuple(str(design[v][f]) for f in factors)
            if cell in seen:
                raise FactorialError(f"variants {seen[cell]!r} and {v!r} both have {_describe(factors, cell)}: a "
                                     "balanced factorial has each combination of levels once")
            seen[cell] = v
        combos = list(product(*order))
        missing = [c for c in combos if c not in seen]
        if missing:
            raise FactorialError(f"unbalanced factorial: {len(missing)} of the {len(combos)} combinations of "
                                 f"{' × '.join(factors) or 'no factor'} have no variant, first "
                                 f"{_describe(factors, missing[0])}")
        return cls(factors, order, tuple(seen[c] for c in combos))

    @property
    def shape(self) -> tuple[int, ...]:
        """The number of levels of each factor."""
        return tuple(len(lv) for lv in self.levels)


def _level_order(design: Mapping[str, Mapping[str, str]], factors: tuple[str, ...],
                 levels: Mapping[str, Sequence[str]] | None) -> tuple[tuple[str, ...], ...]:
    """Each factor's levels: as `levels` lists them (every used level must be there), else in order
    of first appearance."""
    out = []
    for f in factors:
        used = tuple(dict.fromkeys(str(design[v][f]) for v in design))
        if levels is None or f not in levels:
            out.append(used)
            continue
        listed = tuple(str(x) for x in levels[f])
        unknown = [x for x in used if x not in listed]
        if unknown:
            raise FactorialError(f"factor {f!r}: level {unknown[0]!r} is not one of its levels {list(listed)}")
        out.append(listed)
    if math.prod(len(x) for x in out) == 0:
        raise FactorialError("a factor has no level")
    return tuple(out)


def _describe(factors: Sequence[str], cell: Sequence[str]) -> str:
    return ", ".join(f"{f}={lv}" for f, lv in zip(factors, cell)) or "no factor"


def aligned(cube: ShareCube, factorial: Factorial) -> np.ndarray:
    """`[item, variant, group]` shares with the variants in factorial order, each item's row
    renormalised to sum to exactly 1 (within `SUM_TOLERANCE` it already did). The cube and the
    design must name the same variants."""
    extra = sorted(set(cube.variants) - set(factorial.variants))
    lacking = sorted(set(factorial.variants) - set(cube.variants))
    if extra or lacking:
        raise FactorialError(f"the share table and the design name different variants: only in the table "
                             f"{extra}, only in the design {lacking}")
    index = [cube.variants.index(v) for v in factorial.variants]
    shares = cube.shares[:, index, :]
    return shares / shares.sum(axis=-1, keepdims=True)
