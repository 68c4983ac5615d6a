"""Calibration of GlobalOpinionQA's intervals and its cue-specificity verdict by simulation:
planted worlds drawn without a model, measured by the same `evaluate`, bootstrap and verdict
as a run (docs/benchmarks/globalopinion.md, *How far the intervals hold*).

A world is a population of survey questions: each asks some of `n_countries` countries (the
first ones more often, so some countries have few questions, as in the real survey), each
country's answer shares scatter around the question's own, and a model's distribution leans
toward one favoured country. Naming country X in the prompt mixes a fraction `cue_pull` of X's
shares into the model's distribution, plus cue noise that does not depend on X: `cue_pull = 0`
is a world where the cue is not specific (its specificity is 0 by symmetry: nothing singles X out
from the question's other countries). The survey-order reading is the model's distribution under
a primacy bias; half the questions are ordered scales (all options, in order).

A world's truth is its population value of each metric: the same ratio of sums over a large
draw of questions (`truth`). `calibrate` draws `n_items` questions many times, computes every
95% interval the report prints for the tracked metrics, and counts how often it holds the truth,
and how often the cue-specificity verdict says the cue is specific.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from probe.benches.globalopinion.measures import ordinal_similarity, similarity
from probe.benches.globalopinion.metrics import CONDITIONS, Ordinal, Sums, evaluate
from probe.benches.globalopinion.specificity import cue_specificity
from probe.metrics.core import bootstrap_weights, get_path, percentile_ci, to_scalars
from probe.viz.markdown import side

TRACKED: tuple[str, ...] = (
    "default.mean.lift", "default.mean.macro_lift", "default.mean.macro_similarity",
    "default.lift.c0", "default.lift.c5",
    "default.survey_order.mean.lift", "default.survey_order.mean.macro_lift",
    "default.ordinal.mean.lift", "default.ordinal.mean.similarity",
    "cross_national.mean.gain", "cross_national.mean.specificity", "cross_national.specificity.c0",
)
"""The metric paths whose intervals are checked (pooled, macro, per country — `c0` asked
often, `c5` rarely —, survey order, ordinal, the cue's gain and specificity)."""
SPECIFICITY = "cross_national.mean.specificity"


@dataclass(frozen=True)
class World:
    """One planted world (module docstring)."""

    cue_pull: float
    """Fraction of the named country's shares mixed into the cued distribution (0: not specific)."""
    n_countries: int = 6
    n_options: int = 4
    favour: float = 0.35
    """Fraction of the favoured country's (country 0's) shares in the model's own distribution."""
    cue_noise: float = 0.25
    """Fraction of a fresh random distribution mixed into every cued distribution (any X)."""
    generic: float = 0.0
    """Fraction of the question's mean human answer mixed into every cued distribution, whatever
    country is named: a generic cue (toward the centre), not a specific one."""
    primacy: tuple[float, ...] = (1.6, 1.0, 1.0, 0.8)
    """Multiplier of each option's probability when read once in the survey's order."""
    ask: tuple[float, ...] = (0.95, 0.8, 0.7, 0.6, 0.5, 0.25)
    """Probability that a question asks country c (country 5: rarely)."""


NULL = World(cue_pull=0.0)
PLANTED = World(cue_pull=0.1)
GENERIC = World(cue_pull=0.0, generic=0.4, n_countries=30, ask=(0.5,) * 30)
"""Every cue pulls toward the question's mean answer, whatever it names: no country's cue is specific."""


@dataclass
class Tally:
    """Coverage counts of each tracked interval and the specificity verdicts over replicates."""

    n_rep: int = 0
    hits: dict[str, int] = field(default_factory=dict)
    defined: dict[str, int] = field(default_factory=dict)
    specific: int = 0
    """Replicates whose verdict says the cue moves the model toward the named country."""

    def coverage(self, path: str) -> float:
        """Share of the replicates with a defined interval whose interval held the truth."""
        return self.hits.get(path, 0) / max(self.defined.get(path, 0), 1)


def draw(world: World, n_items: int, rng: np.random.Generator) -> Sums:
    """`n_items` questions of `world` as the per-question sums every metric is a ratio of."""
    c, k = world.n_countries, world.n_options
    items, countries = [f"q{i}" for i in range(n_items)], [f"c{j}" for j in range(c)]
    sim = np.zeros((len(CONDITIONS), n_items, c))
    present, survey = np.zeros_like(sim), np.zeros_like(sim)
    uniform = np.zeros((n_items, c))
    ordinal = Ordinal(sim=np.zeros_like(sim), uniform=np.zeros_like(uniform), present=np.zeros_like(sim))
    human: dict[str, dict[str, np.ndarray]] = {}
    dists: dict[tuple[str, str, str | None], np.ndarray] = {}
    bias = np.asarray(world.primacy[:k])
    for i, item in enumerate(items):
        asked = np.nonzero(rng.random(c) < np.asarray(world.ask[:c]))[0]
        if len(asked) < 2:  # every question asks two countries at least (the cue needs another)
            asked = np.sort(rng.choice(c, size=2, replace=False))
        centre = rng.dirichlet(np.ones(k))
        shares = {countries[j]: rng.dirichlet(6 * centre + 0.3) for j in asked}
        favoured = shares.get(countries[0], rng.dirichlet(6 * centre + 0.3))
        p0 = world.favour * favoured + (1 - world.favour) * rng.dirichlet(np.ones(k))
        human[item], dists[(item, "default", None)] = shares, p0
        read_once = p0 * bias / (p0 * bias).sum()
        scale = i % 2 == 0
        for j in asked:
            name, h = countries[j], shares[countries[j]]
            centre_h = np.mean([shares[countries[y]] for y in asked], axis=0)
            cue = ((1 - world.cue_noise - world.cue_pull - world.generic) * p0
                   + world.cue_noise * rng.dirichlet(np.ones(k)) + world.cue_pull * h + world.generic * centre_h)
            dists[(item, "cross_national", name)] = cue
            uniform[i, j] = similarity(np.full(k, 1.0 / k), h)
            for di, p in enumerate((p0, cue)):
                sim[di, i, j], survey[di, i, j], present[di, i, j] = similarity(p, h), similarity(read_once, h), 1.0
                if scale:
                    ordinal.sim[di, i, j], ordinal.present[di, i, j] = ordinal_similarity(p, h), 1.0
            if scale:
                ordinal.uniform[i, j] = ordinal_similarity(np.full(k, 1.0 / k), h)
    return Sums(countries=countries, sources=["survey"], sim=sim, uniform=uniform, present=present,
                source=np.ones((n_items, 1)), survey=survey,
                specificity=cue_specificity(dists, human, items, countries), ordinal=ordinal)


def truth(world: World, n_items: int = 20_000, seed: int = 0) -> dict[str, float]:
    """The population value of each tracked metric: the point estimate on a large draw."""
    tree = to_scalars(evaluate(draw(world, n_items, np.random.default_rng(seed)), np.ones(n_items)))
    return {path: float(get_path(tree, *path.split("."))) for path in TRACKED}


def calibrate(world: World, n_rep: int = 200, n_items: int = 40, n_boot: int = 400, seed: int = 1,
              truths: Mapping[str, float] | None = None) -> Tally:
    """Draw `n_rep` runs of `n_items` questions; count the intervals holding `truths` (default:
    `truth(world)`) and the specificity verdicts. Each run's bootstrap uses its own seed."""
    truths = dict(truths or truth(world))
    rng, tally = np.random.default_rng(seed), Tally()
    for r in range(n_rep):
        sums = draw(world, n_items, rng)
        point = to_scalars(evaluate(sums, np.ones(n_items)))
        intervals = percentile_ci(evaluate(sums, bootstrap_weights(n_items, n_boot, seed + r)))
        tally.n_rep += 1
        for path, true in truths.items():
            interval = get_path(intervals, *path.split("."))
            if interval is None or not np.all(np.isfinite(interval)):
                continue
            tally.defined[path] = tally.defined.get(path, 0) + 1
            tally.hits[path] = tally.hits.get(path, 0) + int(interval[0] <= true <= interval[1])
        spec = get_path(point, *SPECIFICITY.split("."))
        tally.specific += int(side(spec, get_path(intervals, *SPECIFICITY.split("."))) == 1)
    return tally
