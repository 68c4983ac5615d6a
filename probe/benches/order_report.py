"""A forced-choice run under a non-default ordering design (`bench.orders`; docs/concepts/orders.md):
its `orders` block in metrics.json and the report section saying what the design balances.

The block is computed from the stored tables alone (the `order` column), so re-analysis needs no
model: the design's name and what it balances, the orderings per prompt group, and per condition
the carry-over decomposition (`probe.metrics.carry_over`) where the groups are balanced for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from probe.benches.orders import BALANCES
from probe.metrics.carry_over import carry_over
from probe.metrics.core import AnalysisOptions, bootstrap_weights
from probe.metrics.letters import prompt_groups
from probe.results.scores import ScoreTable
from probe.types import Design
from probe.viz.markdown import value_ci


def design_of(spec: Any) -> str:
    """The ordering design a bench spec ran under (`rotations` for a spec without `orders`)."""
    return str(getattr(spec, "orders", "rotations"))


def order_blocks(table: ScoreTable, design: Design, opts: AnalysisOptions, spec: Any,
                 ci95: dict[str, Any] | None) -> dict[str, Any]:
    """`{"orders": …}` for a run whose `bench.orders` is not the default (`{}` otherwise, so a
    default run's metrics.json gains no key); the carry-over intervals go into `ci95["orders"]`."""
    name = design_of(spec)
    if name == "rotations" or table.order is None:
        return {}
    groups = prompt_groups(table, design)
    order = np.asarray(table.order)
    n_items = int(groups.item.max()) + 1
    boot = bootstrap_weights(n_items, opts.n_boot, opts.seed) if opts.n_boot > 0 else None
    sizes = np.bincount(groups.index)
    block: dict[str, Any] = {"design": name, "balances": BALANCES.get(name, ""), "orderings_per_group": {},
                             "carry_over": {}}
    cis: dict[str, Any] = {}
    for cond in sorted({str(c) for c in groups.condition}):
        rows = np.nonzero(groups.condition[groups.index] == cond)[0]
        block["orderings_per_group"][cond] = int(np.median(sizes[np.unique(groups.index[rows])]))
        found = carry_over(table.logprobs[rows], order[rows], groups.index[rows], groups.item[groups.index[rows]],
                           n_items, opts.temperature, boot)
        if found is not None:
            block["carry_over"][cond], cis[cond] = found
    if ci95 is not None and cis:
        ci95["orders"] = {"carry_over": cis}
    return {"orders": block}


def orders_section(metrics: Mapping[str, Any]) -> str:
    """The report's ordering-design section (empty for a default run)."""
    block = metrics.get("orders")
    if not block:
        return ""
    lines = ["", "## Ordering design", "",
             f"Options shown under `bench.orders={block['design']}`, "
             f"{', '.join(f'{c}: {n}' for c, n in block['orderings_per_group'].items())} orderings per prompt group. "
             f"It balances {block['balances']}. Every reading above (expected, greedy, debiased) averages over "
             "these orderings; the letter prior's `rotations` estimator is the closed form on any group that shows "
             "every option equally often at every letter, here once per K of its orderings."]
    carry = block.get("carry_over") or {}
    cis = ((metrics.get("ci95") or {}).get("orders") or {}).get("carry_over") or {}
    if carry:
        lines += ["", "Carry-over: how much of the choice moves with the option shown just before, beyond the "
                  "letter and the option itself (share of the log-prob variance; ratio ≈ 1 when the preceding "
                  "option carries nothing beyond noise).", "",
                  "| condition | carry-over share | ratio to noise | groups |", "|---|---|---|---|"]
        for cond, v in carry.items():
            ci = cis.get(cond) or {}
            lines.append(f"| {cond} | {value_ci(v['share'], ci.get('share'))} | {value_ci(v['ratio'], ci.get('ratio'))} "
                         f"| {v['n_groups']} |")
    else:
        lines += ["", "No carry-over estimate: the design does not put every option after every other equally "
                  "often within a prompt group (or K < 3), so the preceding option is part of the content effect."]
    return "\n".join(lines) + "\n"
