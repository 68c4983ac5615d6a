"""The report's format-robustness section and figure of a factor run, from `metrics.json`'s
`format` block (`probe.report.format_run`): the answer in one sentence (also the report's
*In short*), a warning when the wording moves the shares significantly more than the group
does, the variants left out, the variance components net of item noise, the observed split,
the verdicts with their tests, the headline number's spread, and each group's share across the
variants."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from probe.types import GroupNoun
from probe.viz.figures import Figure, pyplot, save
from probe.viz.markdown import OPENING_CONCLUSION, table

FORMAT_FIGURE = "format_shares.png"


def format_sentence(block: Mapping[str, Any], groups: GroupNoun = GroupNoun(), most: int = 3) -> str:
    """`UK is over-selected in 12 of 12 wordings; US in 5 of 12, depending mostly on `labels`.`: the
    `most` groups with the highest mean share, each with the factor its share moves with most
    (net of item noise) when its verdict is `format…`."""
    across = block.get("across") or {}
    n = len(block.get("analysed_variants") or block.get("variants") or [])
    ranked = sorted(across, key=lambda g: -float(across[g]["mean"]))[:most]
    parts = []
    for i, g in enumerate(ranked):
        a = across[g]
        moved = a.get("largest_factor") if str(a.get("verdict") or "").startswith("format") else None
        tail = f", depending mostly on `{moved}`" if moved else ""
        parts.append(f"{g} is over-selected in {a['n_over']} of {n} wordings{tail}" if i == 0
                     else f"{g} in {a['n_over']} of {n}{tail}")
    lead = "; ".join(parts) + "." if parts else f"No {groups.one} shares to compare."
    return f"{lead[0].upper()}{lead[1:]}"


def wording_answer(block: Mapping[str, Any], groups: GroupNoun = GroupNoun()) -> str:
    """The factor run's answer in one sentence, for the report's *In short*: the verdict counts
    (Holm-controlled tests), the factor with the largest interaction net of noise, and whether
    the headline number's spread over the wordings exceeds its own interval."""
    counts = block.get("verdict_counts") or {}
    n, kept = len(block.get("variants") or []), len(block.get("analysed_variants") or [])
    below = (block.get("validity") or {}).get("all_below")
    scope = f"{n} wordings" + ("" if kept == n else f", {kept} analysed")
    if not counts:
        answer = f"Wording ({scope}): not tested (no bootstrap)."
    else:
        fmt = counts.get("format-dependent", 0) + counts.get("format-reverses", 0)
        own = block.get("own_term_p_holm")
        alpha = float(block.get("alpha", 0.05))
        if own is None:  # a block written before the own-term test: the share verdicts alone
            answer = (f"Wording ({scope}): {fmt} of {sum(counts.values())} {groups.many}' preferences depend on it "
                      f"({counts.get('format-reverses', 0)} reverse), {counts.get('robust', 0)} hold in every wording, "
                      f"{counts.get('none', 0)} show none (permutation tests, Holm-adjusted at {alpha:g})")
        else:
            moved = sorted((g for g, p in own.items() if p is not None and p < alpha), key=lambda g: own[g])
            drivers = f" ({', '.join(moved)})" if moved else ""
            answer = (f"Wording ({scope}): {len(moved)} of {len(own)} {groups.many}' own preferences depend on it"
                      f"{drivers} (each {groups.one}'s log-ratio against the others', drivers found step by step, "
                      f"permutation tests, Holm-adjusted at {alpha:g}; shares are compositional, so one "
                      f"{groups.one}'s move shifts the others' shares too: on the share scale {fmt} verdicts are "
                      f"format-dependent ({counts.get('format-reverses', 0)} reverse), {counts.get('robust', 0)} hold in "
                      f"every wording, {counts.get('none', 0)} show none)")
        factor = block.get("largest_factor")
        comps = block.get("components") or {}
        if factor and fmt:
            answer += (f"; it moves most with `{factor}` (RMS {_f((comps.get(factor) or {}).get('rms'))} in share units, "
                       f"{groups.one} main effect {_f((comps.get('group') or {}).get('rms'))}, both net of item noise)")
        answer += "."
    head = block.get("headline") or {}
    spread, spread_p = head.get("spread"), block.get("spread_p")
    # said only when the within-item shuffle of the wordings rejects: the range of V noisy
    # estimates against one interval's width fired in a quarter of worlds with no wording effect
    if spread and spread_p is not None and spread_p < float(block.get("alpha", 0.05)):
        answer += (f" The headline {head['metric']} spans {_g(spread['min'])}–{_g(spread['max'])} over the wordings: "
                   f"the {groups.one} shares' divergence from uniform moves with the wording beyond item noise "
                   f"(range p = {spread_p:.3g}, wordings shuffled within items).")
    if below:
        answer += " No wording is a letter reading (median letter mass below 0.5 in every one): read none of it as the model's answer."
    return answer


def format_warning(block: Mapping[str, Any], groups: GroupNoun = GroupNoun()) -> str | None:
    """The warning no reader can miss when the wording moves the shares more than the group does:
    the table's interaction test is significant and the interaction components net of item noise
    exceed the group's. Noise alone never raises it."""
    p, comps = block.get("p_interaction"), block.get("components") or {}
    if p is None or p > float(block.get("alpha", 0.05)) or not comps:
        return None
    group = float((comps.get("group") or {}).get("variance") or 0.0)
    wording = sum(max(float(c.get("variance") or 0.0), 0.0) for t, c in comps.items() if t != "group")
    if wording <= max(group, 0.0):
        return None
    factor = block.get("largest_factor")
    return (f"**Warning: the wording moves the {groups.one} shares more than the {groups.one} does** (interaction "
            f"p = {float(p):.3g}; variance net of item noise {wording:.2e} against {max(group, 0.0):.2e})"
            f"{f'; most of it moves with `{factor}`' if factor else ''}. A {groups.one} preference read from one "
            f"prompt of this run may be the format's, not the model's.")


def format_section(block: Mapping[str, Any], groups: GroupNoun = GroupNoun()) -> str:
    """The markdown section of a factor run's report."""
    n, factors = len(block.get("variants") or []), block.get("factors") or []
    kept = len(block.get("analysed_variants") or []) or n
    lines = ["", f"## Does it survive a change of wording? ({n} prompt variants; figure: figures/{FORMAT_FIGURE})",
             "", wording_answer(block, groups), "", format_sentence(block, groups), ""]
    warning = format_warning(block, groups)
    if warning:
        lines += [f"> {warning}", ""]
    lines += validity_lines(block)
    lines += [f"Shares are exposure-normalised {groups.one} shares of condition `{block.get('condition') or 'all'}` "
              f"(each {groups.one}'s mean over the items that show it, in the point and in every bootstrap "
              f"replicate), over {block.get('n_items')} items; 1/G = {float(block['reference']):.3f}. Design: "
              f"{block.get('design', 'factorial')} over {', '.join(f'`{f}`' for f in factors)}. Variance components "
              f"net of item-sampling noise (share² per cell; RMS in share units; below 0: smaller than the noise):", ""]
    lines += table(["term", "variance", "95% CI", "noise removed", "RMS"], _component_rows(block))
    lines += ["", f"The observed split of the variance around 1/G (noise included; shares add to 1):", ""]
    lines += table(["", groups.one, *factors, "rest"], _split_rows(block))
    lines += _cost_lines(block)
    kw, kw_ci = block.get("kendall_w"), block.get("kendall_w_ci95")
    lines += ["", f"Rank stability (Kendall's W over {kept} variants): {_f(kw)}"
              + (f" [{_f(kw_ci[0])}, {_f(kw_ci[1])}]" if kw_ci else "")
              + (f"; with no wording effect it would be {_f(block.get('kendall_w_null'))} "
                 f"(permutation mean; P(W ≤ observed) = {_f(block.get('kendall_w_p'))})"
                 if block.get("kendall_w_null") is not None else "")
              + f". Group × wording interaction: p = {_f(block.get('p_interaction'))} ({block.get('n_perm', 0)} "
                "permutations of the variant labels within items).",
              "", *table([groups.one, "mean", "effect vs 1/G", "95% CI", "p", "p (Holm)", "above / below (band)",
                          "verdict", "moves most with"], _group_rows(block))]
    lines += headline_lines(block)
    lines += letter_prior_lines(block)
    return "\n".join(lines) + "\n"


def validity_lines(block: Mapping[str, Any]) -> list[str]:
    """The variants left out (median letter mass below the threshold) with their reason."""
    validity = block.get("validity") or {}
    if validity.get("all_below"):
        return [f"> **No wording is a letter reading:** every variant's median letter mass is below "
                f"{validity.get('min_letter_mass')}; all are analysed, but they read letters the model does not "
                "answer with.", ""]
    excluded = validity.get("excluded") or []
    if not excluded:
        return []
    return [f"Left out of the split and the verdicts ({len(excluded)} of {len(block.get('variants') or [])} "
            f"variants, not letter readings): " + "; ".join(f"`{e['name']}` ({e['reason']})" for e in excluded) + ".",
            ""]


def headline_lines(block: Mapping[str, Any]) -> list[str]:
    """The bench's headline number under each variant with its own interval, and its spread."""
    head = block.get("headline") or {}
    spread = head.get("spread")
    if not spread:
        return []
    rows = [[v["name"], _g(v["value"]), "–" if not v["ci95"] else f"[{_g(v['ci95'][0])}, {_g(v['ci95'][1])}]",
             "yes" if v["analysed"] else "no"] for v in head.get("per_variant") or []]
    return ["", f"The headline {head['metric']} over the wordings: min {_g(spread['min'])}, median "
                f"{_g(spread['median'])}, max {_g(spread['max'])}, range {_g(spread['range'])} against a protocol "
                f"interval {_g(head.get('protocol_ci_width'))} wide.", "",
            *table(["variant", head["metric"], "95% CI", "analysed"], rows)]


def _cost_lines(block: Mapping[str, Any]) -> list[str]:
    spent = block.get("cost") or {}
    if spent.get("per_variant_vs_protocol") is None:
        return []
    return ["", f"Cost: {spent['tokens_computed']:,} tokens computed for {spent['prompt_tokens']:,} prompt tokens, "
                f"{spent['computed_per_limit']:.3f}× the trie limit of all variants ({spent['trie_limit']:,}); "
                f"per variant {spent['per_variant_vs_protocol']:.2f}× the protocol's own limit "
                f"({spent['protocol_trie_limit']:,}): what the variants share runs once."]


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


def _group_rows(block: Mapping[str, Any]) -> list[list[Any]]:
    def ci(x: Any) -> str:
        return "–" if not x else f"[{_f(x[0])}, {_f(x[1])}]"

    return [[g, _f(a["mean"]), _f(a.get("effect")), ci(a.get("effect_ci95")), _f(a.get("p_interaction")),
             _f(a.get("p_holm")), "–" if a.get("n_over_band") is None else f"{a['n_over_band']} / {a['n_under_band']}",
             a["verdict"] or "–", a.get("largest_factor") or "–"] for g, a in (block.get("across") or {}).items()]


def _component_rows(block: Mapping[str, Any]) -> list[list[Any]]:
    def ci(x: Any) -> str:
        return "–" if not x else f"[{_e(x[0])}, {_e(x[1])}]"

    names = {"group": "group (main effect)", "rest": "rest (higher-order)"}
    return [[names.get(t, f"group × {t}"), _e(c.get("variance")), ci(c.get("variance_ci95")), _e(c.get("noise")),
             _f(c.get("rms"))] for t, c in (block.get("components") or {}).items()]


def _g(x: Any) -> str:
    """Three significant digits (a headline such as a KL of 0.0003 must not print as 0.000)."""
    return "–" if x is None or not np.isfinite(float(x)) else f"{float(x):.3g}"


def _e(x: Any) -> str:
    return "–" if x is None or not np.isfinite(float(x)) else f"{float(x):.2e}"


def _f(x: Any) -> str:
    return "–" if x is None or not np.isfinite(float(x)) else f"{float(x):.3f}"


def plot_format_shares(block: Mapping[str, Any], out_dir: Path, groups: GroupNoun = GroupNoun()) -> Figure:
    """Each group's share under every variant: a dot per variant, coloured by its level of the
    factor with the largest interaction share, the protocol's variant a black ring, 1/G dashed."""
    plt = pyplot()
    names = list(groups_of(block))
    variants = [v for v in block.get("variants") or [] if v["name"] in (block.get("shares") or {})]  # analysed ones
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


def with_wording_answer(report: str, block: Mapping[str, Any], groups: GroupNoun = GroupNoun()) -> str:
    """`report` with the factor run's answer (`wording_answer`) appended to its *In short*
    paragraph (put first, as its own paragraph, when the report has none)."""
    answer = wording_answer(block, groups)
    lines = report.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(OPENING_CONCLUSION):
            lines[i] = f"{line} {answer}"
            return "\n".join(lines)
    title, _, rest = report.partition("\n")
    return f"{title}\n\n{OPENING_CONCLUSION} {answer}\n{rest}"
