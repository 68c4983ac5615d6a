"""The CCD-Bench markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from typing import Any

from probe.metrics.core import get_path
from probe.viz.letters import GREEDY_MARK, GREEDY_NOTE, flagged_conditions, no_debiased
from probe.viz.markdown import Footnotes, fmt, n_boot_of, opening_paragraphs, table


UNDEFINED = "undefined for these items (no prompt shows what it counts)"
NO_EXPECTED = "undefined: the domain's expected count for the cluster is 0"
NEVER_CHOSEN = "undefined: the cluster is never chosen, so it has no position distribution"
NO_DOMAINS = "undefined: the items carry no domain"


def _share_table(m: dict[str, Any], mark: str) -> list[str]:
    """Cluster shares, expected (CI), greedy, debiased (CI) and the position V per cluster."""
    exp, gr, cis = m["expected"], m["greedy"], m.get("ci95", {}).get("expected", {})
    deb, dcis = m.get("debiased"), m.get("ci95", {}).get("debiased", {})
    notes, n_boot, rows = Footnotes(), n_boot_of(m), []
    for c, v in sorted(exp["shares"].items(), key=lambda kv: -kv[1]):
        cells = [c, notes.value(v, UNDEFINED), notes.interval(get_path(cis, f"shares.{c}"), v, UNDEFINED, n_boot),
                 notes.value(gr["shares"].get(c), UNDEFINED)]
        if deb is None:
            cells += [notes.gap(no_debiased(m))] * 2
        else:
            dv = get_path(deb, f"shares.{c}")
            cells += [notes.value(dv, UNDEFINED), notes.interval(get_path(dcis, f"shares.{c}"), dv, UNDEFINED, n_boot)]
        rows.append([*cells, notes.value(exp["cluster_position_V"].get(c), NEVER_CHOSEN)])
    head = ["cluster", "share (expected)", "95% CI", f"share (greedy){mark}", "share (debiased)", "95% CI",
            "position V_c"]
    return [*table(head, rows), *notes.lines()]


def _metric_table(m: dict[str, Any], mark: str) -> list[str]:
    """Entropy, Gini, position V and the χ² statistics, expected (CI) and greedy."""
    exp, gr, cis = m["expected"], m["greedy"], m.get("ci95", {}).get("expected", {})
    notes, n_boot, rows = Footnotes(), n_boot_of(m), []
    for key, label in (("entropy_bits", "Shannon entropy (bits, max 3.32)"), ("gini", "Gini of cluster counts"),
                       ("position_V", "Cramér's V, position (<.10 negligible)"),
                       ("mean_cluster_position_V", "mean per-cluster position V"),
                       ("position_chi2", "χ² over positions"), ("domain_chi2", "χ² domain × cluster")):
        why = NO_DOMAINS if key == "domain_chi2" else UNDEFINED
        rows.append([label, notes.value(exp.get(key), why), notes.interval(cis.get(key), exp.get(key), why, n_boot),
                     notes.value(gr.get(key), why) + mark])
    return [*table(["metric", "expected", "95% CI", "greedy"], rows), *notes.lines()]


EVEN = ((0.1, "nearly evenly"), (0.3, "somewhat unevenly"), (float("inf"), "very unevenly"))
"""How the conclusion words the Gini coefficient of the cluster shares (0 = even)."""


def opening(m: dict[str, Any]) -> list[str]:
    """The conclusion in plain words, for the expected and the debiased reading, and the terms."""
    parts = [_reading(m, "expected", "Expected reading (probability-weighted picks)")]
    parts.append(_reading(m, "debiased", "Debiased reading (letter prior removed)") if m.get("debiased") is not None
                 else "No debiased reading: the run's letter prior could not be estimated (see *Letter prior and "
                      "content*).")
    if m.get("letter_warnings"):
        parts.append("The letter drives the answers (warning below): the debiased reading is the one that speaks "
                     "about culture.")
    return opening_paragraphs(parts, TERMS)


TERMS = (("GLOBE", "the ten cultural clusters of the GLOBE study"),
         ("V", "Cramér's V of cluster by letter position (0 = no position bias)"),
         ("χ²", "Pearson's chi-squared statistic"), ("CI", "95% confidence interval, a bootstrap over items"),
         ("π", "the letter prior, the model's preference for a letter whatever it shows"))
"""The abbreviations CCD-Bench's report uses, defined in its opening."""


def _reading(m: dict[str, Any], block: str, head: str) -> str:
    """How evenly one reading spreads its picks over the clusters, with its most and least picked."""
    tree = m.get(block) or {}
    shares = {c: v for c, v in (tree.get("shares") or {}).items() if v is not None and v == v}
    gini = tree.get("gini")
    if not shares or gini is None or gini != gini:
        return ""
    interval = get_path((m.get("ci95") or {}).get(block), "gini")
    ci = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval and interval[0] is not None else ""
    p = get_path((m.get("p") or {}).get(block), "gini")
    band = get_path((m.get("sim95") or {}).get(block), "shares") or {}
    uniform = 1 / len(shares)
    if p is None or p >= ALPHA:  # no test, or no detectable preference: naming a cluster would be chance
        test = "" if p is None else f"no detectable preference (test of no preference p = {p:.3g}); "
        dev = max(abs(v - uniform) for v in shares.values())
        return (f"{head}: {test}the picks over the {len(shares)} GLOBE clusters have Gini {gini:.3f}{ci} (0 = even); "
                f"the largest deviation of a cluster's share from uniform {uniform:.3f} is {dev:.3f}; no cluster is "
                "singled out.")
    fixed = get_path(m.get(block), "gini_corrected")
    word = next(w for bound, w in EVEN if (gini if fixed is None else fixed) < bound)
    top, low = max(shares, key=shares.get), min(shares, key=shares.get)

    def share(c: str) -> str:
        lo_hi = band.get(c)
        return f"{shares[c]:.3f}" + (f" [{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]" if lo_hi else "")

    return (f"{head}: the picks spread {word} over the {len(shares)} GLOBE clusters (Gini {gini:.3f}{ci}, 0 = "
            f"even; test of no preference p = {p:.3g}); most {top} {share(top)}, least {low} {share(low)} "
            f"(simultaneous 95% intervals), uniform {uniform:.3f}.")


ALPHA = 0.05
"""A cluster is named as most or least picked only when the test of no preference rejects at this level."""


def report(m: dict[str, Any]) -> str:
    """CCD-Bench report: cluster shares with CIs, position bias, domain residuals, pluralism."""
    exp = m["expected"]
    lines = [f"# CCD-Bench — {m['model']} on `{m['bench']}`", "", *opening(m),
             f"{m['n_items']} items, {m['n_prompts']} prompts."]
    if "letter_mass" in m:
        lines.append(f"Letter mass: mean {fmt(m['letter_mass']['mean'])}, share below 0.5: "
                     f"{fmt(m['letter_mass']['share_below_half'])}.")
    if "invalid_rate" in m:
        lines.append(f"Generation mode: {m['n_invalid']} invalid outputs ({fmt(m['invalid_rate'])}), "
                     "excluded from the shares below and listed at the end.")
    if "balance_score" in m:
        lines.append(f"Latin-square balance score: {m['balance_score']:.2f}%.")
    mark = GREEDY_MARK if flagged_conditions(m) else ""  # one condition: the design
    lines += ["", *_share_table(m, mark), "", *_metric_table(m, mark)]
    if mark:
        lines += ["", GREEDY_NOTE]
    lines += ["", "χ² statistics and residuals count each item once (its choices divided by its number of "
                  "prompts), so the cyclic and Latin-square designs report on the paper's one-ordering-per-item "
                  "scale; shares and V do not depend on it."]
    lines += ["", "Position shares A–J (expected): " + ", ".join(fmt(v) for v in exp["position_shares"])]
    residuals = exp.get("domain_residuals", {})
    if residuals:
        clusters, notes = list(exp["shares"]), Footnotes()
        rows = [[d, *(notes.value(r.get(c), NO_EXPECTED, 2) for c in clusters)] for d, r in residuals.items()]
        lines += ["", "## Standardized residuals, domain × cluster (expected)", "",
                  *table(["domain", *clusters], rows), *notes.lines()]
    if "pluralism" in m:
        p = m["pluralism"]
        lines += ["", "## Rationale pluralism", "",
                  f"{p['n_rationales']} rationales judged ({p['n_judge_errors']} judge errors); "
                  f"share citing ≥ 2 GLOBE dimensions: {fmt(p['rate'])}.", ""]
        lines += [f"- {a} + {b}: {n}" for a, b, n in p["top_pairs"]]
    return "\n".join(lines) + "\n"
