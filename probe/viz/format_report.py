"""The report's format-robustness section and figure of a factor run, from `metrics.json`'s
`format` block (`probe.report.format_run`): a plain sentence, a warning when the wording
explains more of the variance than the group, the variance-share table, the verdicts, and each
group's share across the variants."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from probe.types import GroupNoun
from probe.viz.figures import Figure, pyplot, save
from probe.viz.markdown import table

FORMAT_FIGURE = "format_shares.png"


def format_sentence(block: Mapping[str, Any], groups: GroupNoun = GroupNoun(), most: int = 3) -> str:
    """`UK is over-selected in 12 of 12 wordings; US in 5 of 12, depending mostly on `labels`.`: the
    `most` groups with the highest mean share, each with the factor its share moves with most
    when the wordings disagree."""
    across = block.get("across") or {}
    n = len(block.get("variants") or [])
    ranked = sorted(across, key=lambda g: -float(across[g]["mean"]))[:most]
    parts = []
    for i, g in enumerate(ranked):
        a = across[g]
        moved = a.get("largest_factor") if 0 < a["n_over"] < n else None
        tail = f", depending mostly on `{moved}`" if moved else ""
        parts.append(f"{g} is over-selected in {a['n_over']} of {n} wordings{tail}" if i == 0
                     else f"{g} in {a['n_over']} of {n}{tail}")
    lead = "; ".join(parts) + "." if parts else f"No {groups.one} shares to compare."
    return f"{lead[0].upper()}{lead[1:]}"


def format_share(block: Mapping[str, Any]) -> tuple[float, float]:
    """`(group share, format share)` of the variance: the group's main effect, and the rest."""
    split = block.get("split") or {}
    group = float("nan") if split.get("group") is None else float(split["group"])
    return group, 1.0 - group


def format_warning(block: Mapping[str, Any], groups: GroupNoun = GroupNoun()) -> str | None:
    """The warning no reader can miss when the wording explains more variance than the group."""
    group, fmt = format_share(block)
    if not np.isfinite(group) or fmt <= group:
        return None
    factor = block.get("largest_factor")
    return (f"**Warning: the wording explains more of the variance of the {groups.one} shares ({fmt:.0%}) than the "
            f"{groups.one} does ({group:.0%})**{f'; most of it moves with `{factor}`' if factor else ''}. A "
            f"{groups.one} preference read from one prompt of this run may be the format's, not the model's.")


def format_section(block: Mapping[str, Any], groups: GroupNoun = GroupNoun()) -> str:
    """The markdown section of a factor run's report."""
    n, factors = len(block.get("variants") or []), block.get("factors") or []
    lines = ["", f"## Does it survive a change of wording? ({n} prompt variants; figure: figures/{FORMAT_FIGURE})",
             "", format_sentence(block, groups), ""]
    warning = format_warning(block, groups)
    if warning:
        lines += [f"> {warning}", ""]
    lines += [f"Shares are exposure-normalised {groups.one} shares of condition `{block.get('condition') or 'all'}`, "
              f"averaged over {block.get('n_items')} items; 1/G = {float(block['reference']):.3f}. The variance of "
              f"the variant × {groups.one} shares around 1/G splits into the {groups.one}'s main effect (what every "
              f"wording agrees on), its interaction with each factor, and the rest (factors' own main effects vanish: "
              f"a variant's shares sum to 1). Design: {block.get('design', 'factorial')} over "
              f"{', '.join(f'`{f}`' for f in factors)}.", ""]
    lines += table(["", groups.one, *factors, "rest"], _split_rows(block))
    spent = block.get("cost") or {}
    if spent.get("per_variant_vs_protocol") is not None:
        lines += ["", f"Cost: {spent['tokens_computed']:,} tokens computed for {spent['prompt_tokens']:,} prompt tokens, "
                      f"{spent['computed_per_limit']:.3f}× the trie limit of all variants ({spent['trie_limit']:,}); "
                      f"per variant {spent['per_variant_vs_protocol']:.2f}× the protocol's own limit "
                      f"({spent['protocol_trie_limit']:,}): what the variants share runs once."]
    kw, kw_ci = block.get("kendall_w"), block.get("kendall_w_ci95")
    counts = block.get("verdict_counts") or {}
    lines += ["", f"Rank stability (Kendall's W over variants): {_f(kw)}"
              + (f" [{_f(kw_ci[0])}, {_f(kw_ci[1])}]" if kw_ci else "")
              + ". Verdicts: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none (no bootstrap)") + ".",
              "", *table([groups.one, "mean", "min", "max", "over 1/G", "over (CI)", "under (CI)", "verdict",
                          "moves most with"], _group_rows(block, n))]
    lines += letter_prior_lines(block)
    return "\n".join(lines) + "\n"


def letter_prior_lines(block: Mapping[str, Any]) -> list[str]:
    """Each variant's letter prior at the analysed condition: the probability of the label at each
    position whatever it shows, and the letter's share of the log-prob variance (`letter_split`),
    so a reader sees whether a wording moves the shares through its labels' prior. Empty when no
    variant has a prior there (an older run's block, or a design that cannot separate letter and
    content)."""
    condition = block.get("condition")
    found = []
    for v in block.get("variants") or []:
        prior = _at(v.get("letter_prior"), condition)
        if prior:
            found.append((v, list(prior.values()), (_at(v.get("letter_split"), condition) or {}).get("letter")))
    if not found:
        return []
    width = max(len(prior) for _, prior, _ in found)
    rows = [[v["name"], " ".join(v.get("labels") or []), *(_f(p) for p in prior), *["–"] * (width - len(prior)),
             _f(letter)] for v, prior, letter in found]
    where = f" in condition `{condition}`" if condition else ""
    return ["", f"Letter prior per wording{where}: the probability each answer position gets whatever option "
                "it shows (1/K: none), and the letter's share of the letter log-prob variance. A wording whose "
                "labels carry a strong prior moves the raw shares; `debiased` removes it.", "",
            *table(["variant", "labels", *(f"P(label {k + 1})" for k in range(width)), "letter share"], rows)]


def _at(tree: Any, condition: str | None) -> Mapping[str, Any] | None:
    """`tree[condition]` (the first entry when the bench has no condition field)."""
    if not isinstance(tree, Mapping) or not tree:
        return None
    if condition is None:
        return next(iter(tree.values()))
    return tree.get(condition)


def _split_rows(block: Mapping[str, Any]) -> list[list[Any]]:
    factors, split = block.get("factors") or [], block.get("split") or {}
    ci = block.get("split_ci95")

    def row(name: str, s: Mapping[str, Any], lo: Mapping[str, Any] | None, hi: Mapping[str, Any] | None) -> list[Any]:
        def cell(value: Any, low: Any, high: Any) -> str:
            return _f(value) + (f" [{_f(low)}, {_f(high)}]" if lo is not None else "")

        inter = s.get("interactions") or {}
        return [name, cell(s.get("group"), lo and lo.get("group"), hi and hi.get("group")),
                *(cell(inter.get(f), lo and lo["interactions"].get(f), hi and hi["interactions"].get(f))
                  for f in factors),
                cell(s.get("rest"), lo and lo.get("rest"), hi and hi.get("rest"))]

    rows = [row("all", split, ci[0] if ci else None, ci[1] if ci else None)]
    for g, a in (block.get("across") or {}).items():
        rows.append(row(g, a["split"], None, None))
    return rows


def _group_rows(block: Mapping[str, Any], n: int) -> list[list[Any]]:
    return [[g, _f(a["mean"]), _f(a["min"]), _f(a["max"]), f"{a['n_over']}/{n}",
             "–" if a["n_over_ci"] is None else f"{a['n_over_ci']}/{n}",
             "–" if a["n_under_ci"] is None else f"{a['n_under_ci']}/{n}", a["verdict"] or "–",
             a.get("largest_factor") or "–"] for g, a in (block.get("across") or {}).items()]


def _f(x: Any) -> str:
    return "–" if x is None or not np.isfinite(float(x)) else f"{float(x):.3f}"


def plot_format_shares(block: Mapping[str, Any], out_dir: Path, groups: GroupNoun = GroupNoun()) -> Figure:
    """Each group's share under every variant: a dot per variant, coloured by its level of the
    factor with the largest interaction share, the protocol's variant a black ring, 1/G dashed."""
    plt = pyplot()
    names = list(groups_of(block))
    variants = block.get("variants") or []
    factor = block.get("largest_factor")
    levels = list(dict.fromkeys(str(v["levels"].get(factor)) for v in variants)) if factor else []
    colours = {lv: plt.get_cmap("tab10")(i % 10) for i, lv in enumerate(levels)}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(names) + 2), 4.0))
    offsets = np.linspace(-0.3, 0.3, len(variants)) if len(variants) > 1 else np.zeros(1)
    for k, v in enumerate(variants):
        shares = block["shares"][v["name"]]
        x = np.arange(len(names)) + offsets[k]
        y = [shares[g] for g in names]
        colour = colours.get(str(v["levels"].get(factor)), "tab:blue") if factor else "tab:blue"
        ax.scatter(x, y, s=14, color=colour, alpha=0.8)
        if int(v["index"]) == 0:
            ax.scatter(x, y, s=60, facecolors="none", edgecolors="black", linewidths=1.2, label="protocol")
    for lv, colour in colours.items():
        ax.scatter([], [], s=14, color=colour, label=f"{factor}={lv}")
    ax.axhline(float(block["reference"]), color="grey", linestyle="--", linewidth=1, label="1/G")
    ax.set_xticks(np.arange(len(names)), names, rotation=45, ha="right")
    ax.set_ylabel(f"{groups.one} share")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return save(fig, out_dir, FORMAT_FIGURE, f"Each {groups.one}'s share under every prompt variant (a dot per "
                f"variant{f', coloured by its `{factor}` level' if factor else ''}; ring: the protocol's prompt; "
                "dashed: 1/G, no preference).")


def groups_of(block: Mapping[str, Any]) -> list[str]:
    """The groups in descending mean share."""
    across = block.get("across") or {}
    return sorted(across, key=lambda g: -float(across[g]["mean"]))
