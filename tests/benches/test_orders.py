"""`bench.orders`: the generic ordering designs (rotations, permutations with a cap and a seeded
sample, Williams, reverse), the letter prior's closed form on any position-balanced group, the
carry-over decomposition (calibrated on simulated log-probs), and runs on the tiny model: a DiSCo
file under `permutations` (24 distinct orderings per item, shares equal to an independent average
over them, every unique token computed once), `williams`, the refusals (one line, rc 2, nothing
written), GlobalOpinionQA's `reverse`, CCD-Bench's `bench.design` read as `bench.orders`, and
`probe compare` across designs, and the dry run's design line."""

from __future__ import annotations

import itertools
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import ccd_items, disco_rows, prepare, probe_env, run_probe, write_csv, write_json_file
from test_globalopinion_data import row, write
from test_text_runs import _config

from probe.benches.orders import (
    OrderDesign,
    design_balance,
    orderings,
    unrank_permutation,
    williams_orders,
)
from probe.errors import ProbeInputError
from probe.metrics.carry_over import carry_over
from probe.metrics.balance import position_balanced
from probe.metrics.letters import LetterOptions, analyse
from probe.pipeline.execute import run
from probe.pipeline.spec import run_config
from probe.results.scores import ScoreTable
from probe.types import Design

REPO = Path(__file__).resolve().parents[2]


def _after_counts(orders: tuple[tuple[int, ...], ...], k: int) -> np.ndarray:
    """`[a, b]` how often option b sits immediately after option a."""
    out = np.zeros((k, k), dtype=int)
    for o in orders:
        for a, b in zip(o, o[1:]):
            out[a, b] += 1
    return out


# --- the designs ------------------------------------------------------------------------------

def test_rotations_are_the_cyclic_shifts_and_permutations_all_of_them() -> None:
    assert orderings(4, OrderDesign()).orders == ((0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2))
    perms = orderings(4, OrderDesign("permutations")).orders
    assert perms == tuple(itertools.permutations(range(4)))
    assert [unrank_permutation(r, 5) for r in range(120)] == list(itertools.permutations(range(5)))


@pytest.mark.parametrize("k", range(2, 10))
def test_williams_balances_letters_and_first_order_carry_over(k: int) -> None:
    """K orderings for even K, 2K for odd; each option equally often at each letter, and each
    ordered pair adjacent once (even) or twice (odd)."""
    orders = williams_orders(k)
    assert len(orders) == (k if k % 2 == 0 else 2 * k)
    at = np.zeros((k, k), dtype=int)
    for o in orders:
        assert sorted(o) == list(range(k))
        at[list(o), range(k)] += 1
    assert (at == len(orders) // k).all()
    after = _after_counts(orders, k)
    assert (after[~np.eye(k, dtype=bool)] == (1 if k % 2 == 0 else 2)).all() and (np.diag(after) == 0).all()
    balance = design_balance(orders)
    assert balance.positions and balance.carry_over


def test_reverse_is_the_order_and_its_reverse() -> None:
    assert orderings(5, OrderDesign("reverse")).orders == ((0, 1, 2, 3, 4), (4, 3, 2, 1, 0))
    assert not design_balance(orderings(5, OrderDesign("reverse")).orders).positions


def test_permutations_over_the_cap_are_refused_or_sampled_without_replacement() -> None:
    with pytest.raises(ProbeInputError, match=r"10 options have 3628800 orderings, above bench.orders_cap=720"):
        orderings(10, OrderDesign("permutations"))
    with pytest.raises(ProbeInputError, match=r"bench.orders_sample=800 exceeds bench.orders_cap=720"):
        orderings(10, OrderDesign("permutations", sample=800))
    drawn = orderings(10, OrderDesign("permutations", sample=200, seed=7))
    assert drawn.sampled and len(drawn.orders) == 200 == len(set(drawn.orders))
    assert all(sorted(o) == list(range(10)) for o in drawn.orders)
    assert list(drawn.orders) == sorted(drawn.orders)  # read in lexicographic order
    assert orderings(10, OrderDesign("permutations", sample=200, seed=7)) == drawn
    assert orderings(10, OrderDesign("permutations", sample=200, seed=8)).orders != drawn.orders
    with pytest.raises(ProbeInputError, match=r"bench.orders_sample=5 samples orderings of bench.orders=permutations "
                                              r"only; bench.orders=williams has a fixed set"):
        orderings(4, OrderDesign("williams", sample=5))
    # below the cap a sample as large as K! is every ordering, not a draw
    assert not orderings(3, OrderDesign("permutations", sample=6)).sampled


def test_a_sample_is_uniform_over_orderings() -> None:
    """Across seeds, each option leads the sampled orderings about 1/K of the time."""
    firsts = np.zeros(7)
    for seed in range(40):
        for o in orderings(7, OrderDesign("permutations", cap=100, sample=100, seed=seed)).orders:
            firsts[o[0]] += 1
    shares = firsts / firsts.sum()
    assert np.abs(shares - 1 / 7).max() < 0.02, shares


# --- the letter prior and the carry-over on planted tables ------------------------------------

def _table(lp: np.ndarray, orders: np.ndarray, items: list[str]) -> ScoreTable:
    n = len(lp)
    return ScoreTable(prompt_id=np.arange(n), item_id=np.array(items, object),
                      design={"condition": np.array(["C0"] * n, object), "target": np.array([None] * n, object),
                              "rotation": np.zeros(n, np.int64), "ctx_rotation": np.full(n, -1, np.int64)},
                      groups=np.array([[f"g{o}" for o in order] for order in orders], object),
                      logprobs=lp.astype(np.float64), greedy_valid=np.ones(n, bool), order=orders.astype(np.int64))


DESIGN = Design(condition="condition", target="target", ordering="rotation")


def _planted(orders: np.ndarray, n_items: int, carry: float, noise: float, seed: int,
             prior: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """Log-probs `prior[letter] + content[option] + carry · [option after option 0] + noise`."""
    rng = np.random.default_rng(seed)
    k = orders.shape[1]
    prior = np.zeros(k) if prior is None else prior
    lp, ords, items, contents = [], [], [], []
    for i in range(n_items):
        c = rng.normal(size=k)
        contents.append(c)
        for o in orders:
            x = prior + c[o] + noise * rng.normal(size=k)
            x[1:] += carry * (o[:-1] == 0)
            lp.append(x - np.log(np.exp(x).sum())), ords.append(o), items.append(f"i{i:02d}")
    return np.array(lp), np.array(ords), items, np.array(contents)


def test_permutation_groups_get_the_closed_form() -> None:
    """All 24 orderings are position balanced: the debiased distribution is exactly the planted
    content's softmax and π the planted prior, as under rotations."""
    perms = np.array(list(itertools.permutations(range(4))))
    assert position_balanced(perms, 4) and not position_balanced(perms[:5], 4)
    prior = np.log(np.array([0.4, 0.3, 0.2, 0.1]))
    lp, orders, items, contents = _planted(perms, 3, 0.0, 0.0, 1, prior)
    out = analyse(_table(lp, orders, items), DESIGN, LetterOptions(n_boot=0))
    assert out.blocks["letter_prior_estimator"]["C0"]["estimator"] == "rotations"
    np.testing.assert_allclose(list(out.blocks["letter_prior"]["C0"].values()), np.exp(prior), atol=1e-12)
    for i in range(3):
        q = np.exp(contents[i]) / np.exp(contents[i]).sum()
        rows = np.arange(24 * i, 24 * (i + 1))
        np.testing.assert_allclose(out.debiased[rows], q[orders[rows]], atol=1e-12)
    split = out.blocks["letter_split"]["C0"]
    assert split["residual"] == pytest.approx(0.0, abs=1e-12)


def _carry(orders: np.ndarray, carry: float, seed: int, n_items: int = 20) -> tuple[dict, dict]:
    lp, ords, items, _ = _planted(orders, n_items, carry, 0.5, seed)
    item = np.unique(items, return_inverse=True)[1]
    from probe.metrics.core import bootstrap_weights

    found = carry_over(lp, ords, item, item, n_items, 1.0, bootstrap_weights(n_items, 200, seed))
    assert found is not None
    return found


@pytest.mark.parametrize("orders", [np.array(list(itertools.permutations(range(4)))), np.array(williams_orders(5))],
                         ids=["permutations4", "williams5"])
def test_carry_over_ratio_is_calibrated_and_finds_a_planted_effect(orders: np.ndarray) -> None:
    """No carry-over: the ratio averages 1 and its 95% interval covers 1 in most simulations;
    a planted carry-over (the option after option 0 gains 1 nat) lifts it far above 1."""
    sims = [_carry(orders, 0.0, seed) for seed in range(30)]
    ratios = [p["ratio"] for p, _ in sims]
    assert abs(np.mean(ratios) - 1.0) < 0.1, ratios
    covered = np.mean([ci["ratio"][0] <= 1.0 <= ci["ratio"][1] for _, ci in sims])
    assert covered >= 0.85, covered
    point, ci = _carry(orders, 1.0, 99)
    assert ci["ratio"][0] > 2.0 and point["share"] > 0.05


def test_rotations_have_no_carry_over_estimate() -> None:
    rot = np.array([[(i + r) % 4 for i in range(4)] for r in range(4)])
    lp, ords, items, _ = _planted(rot, 3, 0.0, 0.5, 0)
    item = np.unique(items, return_inverse=True)[1]
    assert carry_over(lp, ords, item, item, 3, 1.0, None) is None


# --- runs on the tiny model -------------------------------------------------------------------

def _run(out: Path, *overrides: str, bench: str = "demo") -> Path:
    return run(run_config(_config(*overrides, bench=bench), out))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("orders")
    os.environ["PROBE_CACHE"] = str(tmp / "cache")
    csv = write_csv(tmp / "unseen.csv", disco_rows(3))
    base = (f"bench.path={csv}", "bench.conditions=[C0]")
    return {"perm": _run(tmp / "perm", *base, "bench.orders=permutations"),
            "williams": _run(tmp / "williams", *base, "bench.orders=williams"),
            "rot": _run(tmp / "rot", *base), "tmp": tmp}


def test_permutations_run_24_orderings_and_its_shares_average_them(runs: dict[str, Path]) -> None:
    prompts = pq.read_table(runs["perm"] / "prompts.parquet").to_pydict()
    scores = pq.read_table(runs["perm"] / "scores.parquet").to_pydict()
    assert len(prompts["prompt_id"]) == 3 * 24
    for item in set(prompts["item_id"]):
        mine = [tuple(o) for o, i in zip(prompts["order"], prompts["item_id"]) if i == item]
        assert sorted(mine) == list(itertools.permutations(range(4)))
    # independent: softmax of the stored letter log-probs, each credited to the culture it shows
    sel, shown = {}, {}
    for lp, groups in zip(scores["letter_logprobs"], prompts["groups"]):
        p = np.exp(np.array(lp, np.float64) - np.logaddexp.reduce(np.array(lp, np.float64)))
        for g, x in zip(groups, p):
            sel[g] = sel.get(g, 0.0) + x
            shown[g] = shown.get(g, 0) + 1
    rate = {g: sel[g] / shown[g] for g in sel}
    expected = {g: r / sum(rate.values()) for g, r in rate.items()}
    metrics = json.loads((runs["perm"] / "metrics.json").read_text())
    got = metrics["expected"]["C0"]["CSD"]
    assert set(got) == set(expected)
    for g in expected:
        assert got[g] == pytest.approx(expected[g], abs=1e-6)
    manifest = json.loads((runs["perm"] / "manifest.json").read_text())
    assert manifest["bench"]["orders"]["orderings"] == {"4": 24}
    assert manifest["bench"]["config"]["orders"] == "permutations"
    backend = manifest["backend"]
    assert backend["tokens_computed"] <= 1.01 * backend["unique_tokens"]
    assert metrics["letter_prior_estimator"]["C0"]["estimator"] == "rotations"  # the closed form
    assert metrics["orders"]["carry_over"]["C0"]["n_groups"] == 3
    report = (runs["perm"] / "report.md").read_text()
    assert "## Ordering design" in report and "bench.orders=permutations" in report


def test_williams_run_every_option_follows_every_other_once(runs: dict[str, Path]) -> None:
    prompts = pq.read_table(runs["williams"] / "prompts.parquet").to_pydict()
    assert len(prompts["prompt_id"]) == 3 * 4
    for item in set(prompts["item_id"]):
        mine = tuple(tuple(o) for o, i in zip(prompts["order"], prompts["item_id"]) if i == item)
        assert len(set(mine)) == 4
        after = _after_counts(mine, 4)
        assert (after[~np.eye(4, dtype=bool)] == 1).all()


def test_a_default_run_records_no_design(runs: dict[str, Path]) -> None:
    manifest = json.loads((runs["rot"] / "manifest.json").read_text())
    assert "orders" not in manifest["bench"] and "orders" not in manifest["bench"]["config"]
    assert "orders" not in json.loads((runs["rot"] / "metrics.json").read_text())


def test_compare_across_designs_says_so(runs: dict[str, Path]) -> None:
    from probe.commands.compare import compare_runs, comparison_markdown

    c = compare_runs(runs["perm"], runs["rot"], ["C0.KL"], n_boot=50)
    assert c.orders == ("permutations", "rotations")
    assert "A shows the options under `bench.orders=permutations`, B under `bench.orders=rotations`" in \
        comparison_markdown(c)
    assert compare_runs(runs["rot"], runs["rot"], ["C0.KL"], n_boot=50).orders is None


@pytest.mark.parametrize("override, message", [
    ("bench.orders=shuffled", "probe: error: bench.orders: 'shuffled' is not one of ['rotations', 'permutations', "
                              "'williams', 'reverse']"),
    ("bench.orders_cap=10", "probe: error: bench.orders=permutations: 4 options have 24 orderings, above "
                            "bench.orders_cap=10; sample some"),
])
def test_unknown_and_over_cap_designs_stop_in_one_line(tmp_path: Path, override: str, message: str) -> None:
    out = tmp_path / "run"
    proc = run_probe(["model=tiny", "bench=demo", "bench.orders=permutations", override, f"hydra.run.dir={out}",
                      "progress=false"], cwd=REPO, env=probe_env(tmp_path / "cache"))
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr
    assert not out.exists()


# --- other benches ----------------------------------------------------------------------------

def test_globalopinion_reverse_shows_each_scale_both_ways(tmp_path: Path) -> None:
    path = write(tmp_path, [row()])
    bench = prepare({"kind": "globalopinion", "path": str(path), "conditions": ["default"], "orders": "reverse"})
    k = len(bench.items[0].options)
    assert [p.order for p in bench.prompts] == [tuple(range(k)), tuple(reversed(range(k)))]
    assert bench.source["orders"]["orderings"] == {str(k): 2}


def test_ccd_reads_design_as_orders(tmp_path: Path) -> None:
    path = write_json_file(tmp_path / "CCD-Bench.json", ccd_items(2))
    williams = prepare({"kind": "ccd", "path": str(path), "orders": "williams"})
    assert [p.order for p in williams.prompts[:10]] == list(williams_orders(10))
    assert {p.value("condition") for p in williams.prompts} == {"williams"}
    square = prepare({"kind": "ccd", "path": str(path), "orders": "latin_square"})
    same = prepare({"kind": "ccd", "path": str(path), "design": "latin_square"})
    assert [p.order for p in square.prompts] == [p.order for p in same.prompts] and len(same.prompts) == 2
    with pytest.raises(ProbeInputError, match="bench.design=latin_square and bench.orders=williams name two designs"):
        prepare({"kind": "ccd", "path": str(path), "design": "latin_square", "orders": "williams"})
    with pytest.raises(ProbeInputError, match=f"10 options have {math.factorial(10)} orderings"):
        prepare({"kind": "ccd", "path": str(path), "orders": "permutations"})


def test_dry_run_prints_the_designs_prompt_count_and_trie_cost(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                               runs: dict[str, Path]) -> None:
    """Before anything runs: the prompts, the trie's unique tokens and the design's orderings."""
    import logging

    csv = write_csv(tmp_path / "unseen.csv", disco_rows(3))
    with caplog.at_level(logging.INFO):
        _run(tmp_path / "dry", f"bench.path={csv}", "bench.conditions=[C0]", "bench.orders=permutations",
             "dry_run=true")
    text = " ".join(caplog.text.split())
    manifest = json.loads((runs["perm"] / "manifest.json").read_text())
    assert "dry run: 72 prompts" in text
    assert f"the prompt trie holds {manifest['backend']['unique_tokens']} unique tokens" in text
    assert "ordering design permutations: 24 orderings of 4 options per item and condition" in text
