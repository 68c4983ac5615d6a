"""Calibration of the format-robustness analysis by simulation: planted worlds with known
population shares, drawn without a model and run through the same `analyse` as a real run.

A world (`World`) has G groups, a factorial of wordings, items that each show `shown` of the
groups, and an item's choice distribution over the groups it shows under a wording:
`softmax_g(pref_g + inter[v, g] + item_ig + noise_ivg)` — a group preference, a planted
group × factor interaction (0 in the null world: the same population shares in every wording),
an item × group effect (items differ) and item × wording noise. Its truth (`truth`) is the
population's exposure-normalised shares, from one large draw. `calibrate` draws replicates and
counts how often each 95% interval holds its true value, how often the null world raises a
`format…` verdict for any group (family-wise), and how often a planted interaction is flagged
for its group (power). `python scripts/format_calibration.py` prints the table of
docs/concepts/format-robustness.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from probe.metrics.factorial_shares import Factorial, ShareCube, exposure_means
from probe.metrics.format_robustness import FormatRobustness, analyse
from probe.metrics.variance_split import term_sums_of_squares, terms

TRUTH_ITEMS = 200_000
"""Items of the one large draw that stands for the population."""


@dataclass(frozen=True)
class World:
    """A planted world (see the module docstring); logits in nats."""

    n_items: int = 24
    levels: tuple[int, ...] = (2, 2)
    """Levels of each factor (a full factorial; factor names `f0`, `f1`, …)."""
    preference: tuple[float, ...] = (0.4, 0.0, 0.0, -0.4)
    """Each group's preference logit (G = its length)."""
    shown: int = 3
    """Groups each item shows (drawn at random per item)."""
    interaction: tuple[tuple[int, int, float], ...] = ()
    """Planted `(group, factor, size)`: the group's logit is `+size` at the factor's level 0 and
    `−size` at its other levels (a sign-changing group × factor interaction)."""
    item_sd: float = 0.3
    noise_sd: float = 0.5
    """Item × wording × group noise."""

    @property
    def factorial(self) -> Factorial:
        """The variants `v0…` with levels `f0=l0…`, in factorial order."""
        grid = np.stack(np.meshgrid(*[np.arange(n) for n in self.levels], indexing="ij"), -1).reshape(-1, len(self.levels))
        return Factorial.of({f"v{i}": {f"f{k}": f"l{c}" for k, c in enumerate(row)} for i, row in enumerate(grid)})

    def logits(self) -> np.ndarray:
        """`[variant, group]` the population logit (preference + planted interactions)."""
        grid = np.stack(np.meshgrid(*[np.arange(n) for n in self.levels], indexing="ij"), -1).reshape(-1, len(self.levels))
        out = np.tile(np.asarray(self.preference, dtype=np.float64), (len(grid), 1))
        for group, factor, size in self.interaction:
            out[:, group] += np.where(grid[:, factor] == 0, size, -size)
        return out


def draw(world: World, n_rep: int, rng: np.random.Generator, n_items: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`n_rep` replicate tables: shares `[rep, item, variant, group]` and shown `[rep, item, group]`."""
    n = world.n_items if n_items is None else n_items
    base = world.logits()
    n_var, n_groups = base.shape
    order = np.argsort(rng.random((n_rep, n, n_groups)), axis=-1)
    shown = np.zeros((n_rep, n, n_groups), dtype=bool)
    np.put_along_axis(shown, order[..., :world.shown], True, axis=-1)
    logit = (base + rng.normal(0, world.item_sd, (n_rep, n, 1, n_groups))
             + rng.normal(0, world.noise_sd, (n_rep, n, n_var, n_groups)))
    logit = np.where(shown[:, :, None, :], logit, -np.inf)
    e = np.exp(logit - logit.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True), shown


@dataclass(frozen=True)
class Truth:
    """A world's population values of what the analysis estimates."""

    shares: np.ndarray
    """`[variant, group]`."""
    effects: np.ndarray
    """`[group]` `mean_v S − 1/G`."""
    components: np.ndarray
    """`[group, factors…, rest]` sums of squares per cell (no noise: the population has none)."""


def truth(world: World, seed: int = 12345) -> Truth:
    """The population values, from one draw of `TRUTH_ITEMS` items."""
    shares, shown = draw(world, 1, np.random.default_rng(seed), TRUTH_ITEMS)
    s = exposure_means(np.ones((1, TRUTH_ITEMS)), shares[0], shown[0].astype(np.float64))[0]
    g = s.shape[-1]
    k = len(world.levels)
    d = np.moveaxis((s - 1 / g).reshape(*world.levels, g), -1, 0)
    ss = term_sums_of_squares(d, k)
    by_term = np.array([ss[t].sum() for t in terms(k)])
    comps = np.concatenate([by_term[:1 + k], [by_term[1 + k:].sum()]]) / s.size
    return Truth(shares=s, effects=s.mean(axis=0) - 1 / g, components=comps)


@dataclass
class Tally:
    """Counts over the replicates of one world."""

    n_rep: int = 0
    hits: dict[str, list[float]] = field(default_factory=dict)
    """Per interval family, each replicate's share of its intervals that hold the truth."""
    any_format: int = 0
    """Replicates with a `format…` verdict for some group."""
    flagged: dict[int, int] = field(default_factory=dict)
    """Per planted group, replicates that flag it `format…`."""
    spread: int = 0
    own_planted: int = 0
    """Replicates whose own-term count (`own_p_holm`) holds every planted group."""
    own_spill: int = 0
    """Replicates whose own-term count holds a group with nothing planted (a spillover counted)."""
    """Replicates whose shares' KL spread over the wordings is called beyond item noise (`spread_p`)."""

    def coverage(self, family: str) -> float:
        """Mean share of the family's intervals holding the truth."""
        return float(np.mean(self.hits[family]))


def _inside(ci: tuple[float, float] | None, value: float) -> float:
    assert ci is not None, "calibration runs with bootstrap replicates"
    return float(ci[0] <= value <= ci[1])


def score(result: FormatRobustness, true: Truth, world: World, tally: Tally) -> None:
    """Add one analysed replicate to `tally` (variant `v{i}` is row i of the truth's shares)."""
    cells = [_inside(c.ci95, true.shares[int(c.variant[1:]), result.groups.index(c.group)]) for c in result.cells]
    effects = [_inside(a.effect_ci95, float(true.effects[result.groups.index(a.group)])) for a in result.across]
    comps = [_inside(c.ci95, float(true.components[k])) for k, c in enumerate(result.components)]
    for family, values in (("shares", cells), ("effects", effects), ("components", comps)):
        tally.hits.setdefault(family, []).append(float(np.mean(values)))
    verdicts = {a.group: a.verdict or "" for a in result.across}
    tally.any_format += any(v.startswith("format") for v in verdicts.values())
    tally.spread += result.spread_p is not None and result.spread_p < 0.05
    if result.own_p_holm is not None:
        planted = {f"g{g}" for g, _, _ in world.interaction}
        moved = {g for g, p in zip(result.groups, result.own_p_holm) if p < 0.05}
        tally.own_planted += bool(planted) and planted <= moved
        tally.own_spill += bool(moved - planted)
    for group, _, _ in world.interaction:
        tally.flagged[group] = tally.flagged.get(group, 0) + verdicts[f"g{group}"].startswith("format")
    tally.n_rep += 1


def calibrate(world: World, n_rep: int = 200, n_boot: int = 200, n_perm: int = 199, seed: int = 0) -> Tally:
    """Draw `n_rep` replicates of `world`, analyse each as a run would be, and tally them."""
    true = truth(world)
    factorial = world.factorial
    shares, shown = draw(world, n_rep, np.random.default_rng(seed))
    groups = tuple(f"g{j}" for j in range(len(world.preference)))
    items = tuple(f"i{i}" for i in range(world.n_items))
    tally = Tally()
    for r in range(n_rep):
        cube = ShareCube(items, factorial.variants, groups, shares[r], shown[r])
        score(analyse(cube, factorial, n_boot=n_boot, seed=seed + r, n_perm=n_perm), true, world, tally)
    return tally


NULL = World()
"""The null world: a group preference, the same population shares in every wording."""
PLANTED = World(interaction=((1, 0, 0.4),))
"""Group g1 × factor f0: +0.4 logits at level 0, −0.4 at level 1 (its share 0.31 against 0.19)."""


def table_rows(worlds: dict[str, World], n_rep: int = 200, seed: int = 0) -> list[list[str]]:
    """One markdown row per world: the coverage of each interval family, the family-wise rate of
    `format…` verdicts, and the rate at which each planted group is flagged (the power)."""
    rows = []
    for name, world in worlds.items():
        tally = calibrate(world, n_rep=n_rep, seed=seed)
        power = ", ".join(f"g{g}: {n / tally.n_rep:.3f}" for g, n in tally.flagged.items()) or "–"
        rows.append([name, *(f"{tally.coverage(f):.3f}" for f in ("shares", "effects", "components")),
                     f"{tally.any_format / tally.n_rep:.3f}", power, f"{tally.spread / tally.n_rep:.3f}"])
    return rows
