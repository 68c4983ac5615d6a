"""The format-robustness analysis (`probe.metrics.format_robustness`) on hand-made share tables:
planted effects land where they were planted, an independent least-squares recomputation of the
variance split agrees, Kendall's W and the verdicts match hand computations, bad input is refused."""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from probe.errors import ProbeInputError
from probe.metrics.core import bootstrap_weights
from probe.metrics.format_robustness import Factorial, FactorialError, ShareCube, analyse
from probe.metrics.variance_split import kendall_w, term_sums_of_squares

LEVELS = {"labels": ("protocol", "lower", "digits"), "cue": ("protocol", "answer", "bare")}
GROUPS = ("A", "B", "C", "D")
Design = dict[str, dict[str, str]]


def design_of(levels: dict[str, tuple[str, ...]]) -> Design:
    """`{variant: {factor: level}}` of the full factorial, the protocol's variant first."""
    return {f"v{n}": dict(zip(levels, cell)) for n, cell in enumerate(itertools.product(*levels.values()))}


def cube_of(shares: np.ndarray, design: Design, groups: tuple[str, ...] = GROUPS) -> ShareCube:
    return ShareCube(tuple(f"i{i}" for i in range(shares.shape[0])), tuple(design), groups, shares)


def test_a_planted_group_effect_without_interaction_is_all_group() -> None:
    design = design_of(LEVELS)
    rng = np.random.default_rng(1)
    per_item = rng.dirichlet(np.ones(4), size=20)  # items differ; every variant shows each item alike
    result = analyse(cube_of(np.repeat(per_item[:, None, :], len(design), axis=1), design), Factorial.of(design),
                     n_boot=200)
    assert result.split.group == pytest.approx(1, abs=1e-12)
    assert all(abs(s) < 1e-12 for _, s in result.split.interactions) and abs(result.split.rest) < 1e-12
    assert result.kendall_w == pytest.approx(1)  # every variant ranks the groups alike
    assert result.split.largest_factor is None


def test_a_planted_group_by_labels_interaction_is_attributed_to_labels() -> None:
    design = design_of(LEVELS)
    by_labels = {"protocol": [0.4, 0.2, 0.2, 0.2], "lower": [0.1, 0.3, 0.3, 0.3], "digits": [0.25, 0.25, 0.25, 0.25]}
    rows = np.array([by_labels[levels["labels"]] for levels in design.values()])
    result = analyse(cube_of(np.repeat(rows[None], 5, axis=0), design), Factorial.of(design), n_boot=0)
    assert result.split.largest_factor == "labels"
    assert result.split.interaction("cue") == pytest.approx(0, abs=1e-12)
    assert result.split.rest == pytest.approx(0, abs=1e-12)
    assert result.split.interaction("labels") > result.split.group > 0  # A's mean is above 1/G, but it moves more
    assert all(a.largest_factor == "labels" for a in result.across)


def _least_squares_split(d: np.ndarray, codes: np.ndarray, n_factors: int) -> dict[tuple[int, ...], float]:
    """The same split written differently: for each term T ∋ group, the sum of squares gained by
    projecting `d` on the cell indicators (dummy coding) of T rather than on those of all its
    proper sub-terms, each projection a least-squares fit. `codes[:, 0]` is the group."""
    def fitted(subsets: list[tuple[int, ...]]) -> np.ndarray:
        columns = [np.ones((len(d), 1))]
        for subset in subsets:
            keys = [tuple(row) for row in codes[:, list(subset)]]
            columns.append(np.array([[k == u for u in sorted(set(keys))] for k in keys], dtype=float))
        x = np.hstack(columns)
        return x @ np.linalg.lstsq(x, d, rcond=None)[0]

    out = {}
    for r in range(n_factors + 1):
        for factors in itertools.combinations(range(1, n_factors + 1), r):
            term = (0, *factors)
            below = [s for k in range(1, len(term)) for s in itertools.combinations(term, k)]
            out[tuple(f - 1 for f in factors)] = float((fitted([term]) ** 2).sum() - (fitted(below) ** 2).sum())
    return out


def test_an_independent_least_squares_split_agrees_on_a_random_three_factor_table() -> None:
    levels = {**LEVELS, "instruction": ("protocol", "p1", "p2", "p3")}
    design = design_of(levels)
    shares = np.random.default_rng(7).dirichlet(np.full(4, 2.0), size=(6, len(design)))
    result = analyse(cube_of(shares, design), Factorial.of(design), n_boot=0)
    means = shares.mean(axis=0)
    cells = [(g, *(levels[f].index(lv) for f, lv in lvs.items())) for lvs in design.values() for g in range(4)]
    d = np.array([means[v, g] - 0.25 for v in range(len(design)) for g in range(4)])
    ss = _least_squares_split(d, np.array(cells), 3)
    total = (d ** 2).sum()
    assert sum(ss.values()) == pytest.approx(total, rel=1e-9)  # the factors' own effects are 0
    assert result.split.group == pytest.approx(ss[()] / total, abs=1e-9)
    for k, factor in enumerate(levels):
        assert result.split.interaction(factor) == pytest.approx(ss[(k,)] / total, abs=1e-9)
    assert result.split.rest == pytest.approx(sum(v for t, v in ss.items() if len(t) > 1) / total, abs=1e-9)


def test_shares_add_to_one_and_the_factor_main_effects_vanish() -> None:
    design = design_of(LEVELS)
    shares = np.random.default_rng(3).dirichlet(np.ones(4), size=(15, len(design)))
    result = analyse(cube_of(shares, design), Factorial.of(design), n_boot=100)
    for split in (result.split, *(a.split for a in result.across)):
        assert split.group + sum(s for _, s in split.interactions) + split.rest == pytest.approx(1, abs=1e-12)
    d = np.moveaxis((shares.mean(axis=0) - 0.25).reshape(3, 3, 4), -1, 0)
    parts = term_sums_of_squares(d, 2)
    assert sum(p.sum() for p in parts.values()) == pytest.approx((d ** 2).sum(), rel=1e-12)
    assert np.abs(d.mean(axis=0)).max() < 1e-15  # averaged over groups nothing is left for a factor


def test_intervals_come_from_the_projects_seeded_item_bootstrap() -> None:
    design = design_of(LEVELS)
    shares = np.random.default_rng(5).dirichlet(np.ones(4), size=(12, len(design)))
    a, b = (analyse(cube_of(shares, design), Factorial.of(design), n_boot=300, seed=s) for s in (4, 4))
    assert a == b
    assert analyse(cube_of(shares, design), Factorial.of(design), n_boot=300, seed=5).split_ci95 != a.split_ci95
    replicates = bootstrap_weights(12, 300, 4) @ shares[:, 2, 1] / 12  # every item shows every group: plain means
    lo, mid, hi = np.percentile(replicates, [2.5, 50, 97.5])
    point, inflate = shares[:, 2, 1].mean(), np.sqrt(12 / 11)  # re-centred on the estimate, small-sample factor
    assert a.cell("v2", "B").share == pytest.approx(point, abs=1e-15)
    assert a.cell("v2", "B").ci95 == pytest.approx((point - inflate * (mid - lo), point + inflate * (hi - mid)),
                                                   abs=1e-12)
    lo, hi = a.split_ci95 or (None, None)
    assert lo is not None and hi is not None and lo.group <= a.split.group <= hi.group


def test_kendall_w_by_hand() -> None:
    assert kendall_w(np.array([[0.1, 0.5, 0.4], [0.2, 0.7, 0.6]])) == pytest.approx(1)
    # ranks (1,2,3), (1,3,2), (2,1,3): rank sums (4,6,8) around 6 → S = 8, W = 12·8 / (3²·(27 − 3)) = 4/9
    assert kendall_w(np.array([[1.0, 2, 3], [1, 3, 2], [2, 1, 3]])) == pytest.approx(4 / 9)
    # ties: ranks (1,2,3) and (1.5,1.5,3): R = (2.5,3.5,6), S = 6.5, W = 12·6.5 / (4·24 − 2·6) = 78/84
    assert kendall_w(np.array([[1.0, 2, 3], [1, 1, 3]])) == pytest.approx(78 / 84)
    assert np.isnan(kendall_w(np.array([[1.0, 2, 3]])))  # one ranking: no concordance to speak of


def test_verdicts_and_their_counts_by_hand() -> None:
    """G = 4, 1/G = 8/32; six items, shares in 32nds (exact in binary). A 9/32 in every item and
    wording: a main effect, no interaction: robust. B (4, 12)/32 alternating over items, the same
    in every wording: mean exactly 1/G: none. C 10/32 under labels=protocol, 6/32 under lower in
    every item: an interaction that crosses 1/G with no item spread: format-reverses. D takes the
    rest, (9, 1)/32 under protocol and (13, 5)/32 under lower: it moves by +4/32 in every item,
    as C moves by −4/32 (the same p); its item spread (±4/32) leaves its band under protocol
    below 1/G (5/32, band up to 7.7/32) but its band under lower around 9/32 holds 1/G (6.3 to
    11.7/32): it depends on the wording without a shown reversal."""
    design = design_of({"labels": ("protocol", "lower"), "cue": ("protocol", "answer")})
    rows = []
    for levels in design.values():
        c = 10 if levels["labels"] == "protocol" else 6
        rows.append([[9, b, c, 32 - 9 - b - c] for b in (4, 12, 4, 12, 4, 12)])
    shares = np.array(rows, dtype=float).transpose(1, 0, 2) / 32
    result = analyse(cube_of(shares, design), Factorial.of(design), n_boot=400)
    got = {a.group: (a.verdict, a.n_over, a.n_over_ci, a.n_under, a.n_under_ci) for a in result.across}
    assert {g: v[0] for g, v in got.items()} == {"A": "robust", "B": "none", "C": "format-reverses",
                                                 "D": "format-dependent"}
    assert got["A"][1:] == (4, 4, 0, 0) and got["B"][1:] == (0, 0, 0, 0) and got["C"][1:] == (2, 2, 2, 2)
    assert dict(result.verdict_counts) == {"robust": 1, "format-reverses": 1, "format-dependent": 1, "none": 1}
    # A and B never change with the wording: every permutation ties them (p = 1); C's and D's pattern
    # comes back only when all six items put their two protocol variants in the same places:
    # chance 6·(1/6)^6 ≈ 1/7776 per permutation, so p is near its floor 1/2000 and Holm's ×4 keeps it < 0.05
    a, b, c, d = (result.group(g) for g in GROUPS)
    assert a.p_interaction == b.p_interaction == 1.0
    assert c.p_interaction == d.p_interaction and c.p_interaction < 0.01 and c.p_holm is not None and c.p_holm < 0.05
    assert a.effect == pytest.approx(1 / 32) and a.effect_ci95 == pytest.approx((1 / 32, 1 / 32))
    assert b.effect == pytest.approx(0, abs=1e-15)
    assert (c.n_over_band, c.n_under_band) == (2, 2) and (d.n_over_band, d.n_under_band) == (0, 2)
    assert (c.mean, c.min, c.max) == (8 / 32, 6 / 32, 10 / 32) and (d.mean, d.min, d.max) == (7 / 32, 5 / 32, 9 / 32)
    plain = analyse(cube_of(shares, design), Factorial.of(design), n_boot=0)
    assert plain.group("A").verdict is None and plain.verdict_counts == () and plain.split_ci95 is None
    assert plain.p_interaction is None


def test_the_long_table_reads_into_the_same_cube() -> None:
    design = design_of(LEVELS)
    shares = np.random.default_rng(2).dirichlet(np.ones(4), size=(3, len(design)))
    cube = cube_of(shares, design)
    frame = pd.DataFrame([{"item_id": i, "variant": v, "group": g, "share": shares[a, b, c]}
                          for a, i in enumerate(cube.items) for b, v in enumerate(cube.variants)
                          for c, g in enumerate(GROUPS)]).sample(frac=1, random_state=0)
    again = ShareCube.from_frame(frame)
    order = [again.items.index(i) for i in cube.items], [again.variants.index(v) for v in cube.variants]
    assert np.array_equal(again.shares[order[0]][:, order[1]][:, :, [again.groups.index(g) for g in GROUPS]], shares)


def _frame() -> pd.DataFrame:
    design = design_of(LEVELS)
    return pd.DataFrame([{"item_id": f"i{i}", "variant": v, "group": g, "share": 0.25}
                         for i in range(2) for v in design for g in GROUPS])


@pytest.mark.parametrize(("broken", "message"), [
    (lambda d: {k: v for k, v in d.items() if k != "v4"}, ("unbalanced factorial: 1 of the 9 combinations of "
                                                            "labels × cue have no variant, first labels=lower, cue=answer")),
    (lambda d: {**d, "v9": d["v0"]}, "variants 'v0' and 'v9' both have labels=protocol, cue=protocol"),
    (lambda d: {**d, "v1": {"labels": "protocol"}}, "variant 'v1' names factors ['labels']"),
    (lambda d: {}, "the design names no variant"),
])
def test_a_design_that_is_no_balanced_factorial_is_refused(broken: Callable[[Design], Design], message: str) -> None:
    with pytest.raises(FactorialError, match="^" + re.escape(message)):
        Factorial.of(broken(design_of(LEVELS)))


def test_bad_share_tables_are_refused_with_what_is_wrong() -> None:
    frame = _frame()
    with pytest.raises(ValueError, match=r"missing cell: item 'i1', variant 'v8', group 'D' has no finite share "
                                         r"\(1 such cells\)"):
        ShareCube.from_frame(frame.iloc[:-1])
    off = frame.copy()
    off.loc[(off.variant == "v3") & (off.item_id == "i0") & (off.group == "A"), "share"] = 0.2
    with pytest.raises(ValueError, match=r"variant 'v3', item 'i0': the group shares sum to 0.95, expected 1"):
        ShareCube.from_frame(off)
    with pytest.raises(ValueError, match=r"\('i0', 'v0', 'A'\) appears 2 times"):
        ShareCube.from_frame(pd.concat([frame, frame.iloc[:1]]))
    with pytest.raises(ValueError, match=r"missing \['share'\]"):
        ShareCube.from_frame(frame.drop(columns="share"))
    cube = ShareCube.from_frame(frame)
    renamed = {("v9" if k == "v8" else k): v for k, v in design_of(LEVELS).items()}
    with pytest.raises(ValueError, match=r"only in the table \['v8'\], only in the design \['v9'\]") as info:
        analyse(cube, Factorial.of(renamed), n_boot=0)
    assert isinstance(info.value, ProbeInputError)  # the command line prints it as one line
    with pytest.raises(ValueError, match=r"factor 'cue': level 'bare' is not one of its levels \['protocol', 'answer'\]"):
        Factorial.of(design_of(LEVELS), levels={"cue": ("protocol", "answer")})


def test_degenerate_tables_give_nan_not_warnings() -> None:
    """One variant: the split is all group and W undefined; every share exactly 1/G: nothing to split."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one = analyse(ShareCube(("i0", "i1"), ("v0",), ("A", "B"), np.array([[[0.7, 0.3]], [[0.5, 0.5]]])),
                      Factorial.of({"v0": {}}), n_boot=50)
        flat = analyse(ShareCube(("i0",), ("v0",), ("A", "B"), np.full((1, 1, 2), 0.5)), Factorial.of({"v0": {}}),
                       n_boot=50)
    assert (one.split.group, one.split.rest, one.split.interactions) == (1.0, 0.0, ())
    assert np.isnan(one.kendall_w) and one.kendall_w_ci95 is not None and np.isnan(one.kendall_w_ci95[0])
    assert np.isnan(flat.split.group) and flat.group("A").verdict == "none"
