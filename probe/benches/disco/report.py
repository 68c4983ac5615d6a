"""The DiSCo markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from typing import Any

from probe.benches.disco.conclusion import opening
from probe.metrics.core import get_path
from probe.viz.letters import GREEDY_MARK, GREEDY_NOTE, flagged_conditions, no_debiased
from probe.viz.markdown import Footnotes, fmt, n_boot_of, table

HEADLINE = [
    ("C0.KL", "KL(CSD‖uniform), nats", "C0"),
    ("C0.Gini", "Gini of CSD", "C0"),
    ("C1.CR", "Compliance rate (location)", "C1"),
    ("C2.CR", "Compliance rate (location + intent)", "C2"),
    ("C2.PSI", "Prior stickiness index", "C2"),
    ("C0.SPD", "SPD high − low resource", "C0"),
    ("C2.SPD", "SPD high − low resource (pooled CSD; 0 for a perfectly compliant model)", "C2"),
    ("SPD_reduction", "SPD(C0) − SPD(C2)", "C0, C2"),
    ("C1.SPD_compliance", "SPD_compliance: CR(high) − CR(low)", "C1"),
    ("C2.SPD_compliance", "SPD_compliance: CR(high) − CR(low) (the gap in steering success)", "C2"),
    ("SPD_compliance_reduction", "SPD(C0) − SPD_compliance(C2)", "C0, C2"),
    ("C3.JSD", "JSD(C3‖C0), bits", "C3"),
    ("C3.JSD_aligned", "JSD(C3 j=0‖C0), bits", "C3"),
    ("C3.PPR", "Primacy pick rate (random 0.25)", "C3"),
]


def report(m: dict[str, Any]) -> str:
    """DiSCo report: headline metrics with CIs, per-culture steering table, position checks."""
    exp = m["expected"]
    lines = [
        f"# DiSCo — {m['model']} on `{m['bench']}`", "", *opening(m),
        f"{m['n_items']} items, {m['n_prompts']} prompts. Expected = probability-weighted selections "
        f"(temperature {m.get('temperature', 1.0)}); greedy = argmax letter (temperature-0 protocol).", "",
    ]
    if "letter_mass" in m:
        lines += [f"Letter mass: mean {fmt(m['letter_mass']['mean'])}, share of prompts below 0.5: "
                  f"{fmt(m['letter_mass']['share_below_half'])}; full-vocabulary argmax is a letter in "
                  f"{fmt(m.get('greedy_valid_rate'))} of prompts.", ""]
    if "invalid_rate" in m:
        lines += [f"Generation mode: {m['n_invalid']} of {m['n_prompts']} outputs invalid "
                  f"({fmt(m['invalid_rate'])}), excluded from the metrics and listed at the end.", ""]
    lines += _headline_table(m)
    lines += ["", "Debiased = the same metric with the letter prior removed from every item's distribution "
                  "(section *Letter prior and content*); PPR is 0.25 there by construction."]
    if flagged_conditions(m) & {cond for _, _, cond in HEADLINE}:
        lines += ["", GREEDY_NOTE]
    lines += _consistency(m)
    lines += _per_culture(m)
    notes, rows = Footnotes(), []
    for cond in ("C0", "C3"):
        lp = get_path(exp, f"{cond}.letter_probs")
        if lp:
            rows.append([f"P(letter) {cond}", *(notes.value(lp[k], UNDEFINED) for k in sorted(lp))])
    ppr = get_path(exp, "C3.PPR_by_ctx_rotation")
    if ppr:
        rows.append(["PPR by context rotation j", *(notes.value(ppr[j], UNDEFINED) for j in sorted(ppr))])
        ent = get_path(exp, "C3.entropy_by_ctx_rotation")
        rows.append(["H/ln 4 by j", *(notes.value(ent[j], UNDEFINED) for j in sorted(ent))])
    lines += ["", "## Position checks (expected)", "", *table(["", "A", "B", "C", "D"], rows), *notes.lines()]
    return "\n".join(lines) + "\n"




PER_CULTURE = ["C0.CSD", "C1.CR_by_culture", "C2.CR_by_culture", "C1.SL", "C2.gain_by_culture",
               "C2.PSI_by_culture", "C3.CSD"]
"""The per-culture table's columns (paths of a reading's tree, `.{culture}` appended)."""


def _per_culture(m: dict[str, Any]) -> list[str]:
    """`## Per culture`: each culture's row in the expected reading, then in the debiased one
    (letter prior removed) right under it, so the two read side by side."""
    exp = m["expected"]
    readings = [("expected", exp)] + ([("debiased", m["debiased"])] if m.get("debiased") is not None else [])
    cultures = sorted(set(get_path(exp, "C0.CSD") or {}) | set(get_path(exp, "C1.CR_by_culture") or {}))
    notes, rows = Footnotes(), []
    for c in cultures:
        for name, tree in readings:
            rows.append([c if name == "expected" else "", name,
                         *(notes.value(get_path(tree, f"{p}.{c}") if get_path(tree, p) else None, NOT_IN_CONDITION)
                           for p in PER_CULTURE)])
    intro = ("Each culture in both readings: expected, then debiased (letter prior removed)." if len(readings) > 1
             else f"Expected reading only ({no_debiased(m)}).")
    return ["", "## Per culture", "", intro, "",
            *table(["culture", "reading", "CSD C0", "CR C1", "CR C2", "SL", "gain C2−C1", "PSI", "CSD C3"], rows),
            *notes.lines()]


SPD_UNDEFINED = ("undefined: the items hold no high-resource or no low-resource culture "
                 "(`bench.high_resource` / `low_resource`)")
UNDEFINED = "undefined for these items (a ratio over no prompt that shows or targets what it counts)"
NOT_IN_CONDITION = ("not in this condition: the culture is not shown (CSD) or not targeted (CR, SL, gain, PSI) in its "
                    "prompts, or the condition was not run (`bench.conditions`)")


def _present(tree: Any, path: str) -> bool:
    """Whether the metric was computed (its key exists, even when its value is undefined)."""
    head, _, leaf = path.rpartition(".")
    node = get_path(tree, head) if head else tree
    return isinstance(node, dict) and leaf in node


def _headline_table(m: dict[str, Any]) -> list[str]:
    """Every computed headline metric: expected with CI, greedy, debiased with CI; each empty
    cell footnoted with why."""
    exp, gr, cis = m["expected"], m["greedy"], m.get("ci95", {}).get("expected", {})
    deb, dcis = m.get("debiased"), m.get("ci95", {}).get("debiased", {})
    flagged, n_boot, notes, rows = flagged_conditions(m), n_boot_of(m), Footnotes(), []
    for path, label, cond in HEADLINE:
        if not _present(exp, path):
            continue
        why = SPD_UNDEFINED if "SPD" in path else UNDEFINED
        value = get_path(exp, path)
        cells = [label, cond, notes.value(value, why), notes.interval(get_path(cis, path), value, why, n_boot),
                 notes.value(get_path(gr, path), why) + (GREEDY_MARK if cond in flagged else "")]
        if deb is None:
            cells += [notes.gap(no_debiased(m))] * 2
        else:
            dv = get_path(deb, path)
            cells += [notes.value(dv, why), notes.interval(get_path(dcis, path), dv, why, n_boot)]
        rows.append(cells)
    return [*table(["metric", "condition", "expected", "95% CI", "greedy", "debiased", "95% CI"], rows),
            *notes.lines()]


def _consistency(m: dict[str, Any]) -> list[str]:
    """C3 consistency: the paper's CSC on greedy choices first, then what the expected block
    has in its place — the probability that four independent samples at temperature T agree."""
    csc = get_path(m["greedy"], "C3.CSC")
    if csc is None:
        return []
    cis = m.get("ci95", {})
    locked = any(w["condition"] == "C3" for w in m.get("letter_warnings") or [])
    note = ["", "The letter drives C3's answers (see the warning above), so CSC and the greedy column say little "
                "about culture: the four context rotations of one option order keep every option at the same "
                "letter, so a letter-locked model scores CSC = 1 by construction."] if locked else []
    notes, n_boot = Footnotes(), n_boot_of(m)
    agreement = get_path(m["expected"], "C3.sample_agreement")
    rows = [["CSC: same culture for all four context rotations, greedy (the paper's; random 1/64)",
             notes.value(csc, UNDEFINED), notes.interval(get_path(cis.get("greedy", {}), "C3.CSC"), csc, UNDEFINED, n_boot)],
            [f"Sample agreement: four independent samples at T = {m.get('temperature', 1.0)} agree",
             notes.value(agreement, UNDEFINED),
             notes.interval(get_path(cis.get("expected", {}), "C3.sample_agreement"), agreement, UNDEFINED, n_boot)]]
    return note + ["", *table(["C3 consistency", "value", "95% CI"], rows), *notes.lines()]


def _nan(v: Any) -> bool:
    """Undefined: NaN in memory, null once written to metrics.json."""
    return v is None or (isinstance(v, float) and v != v)
