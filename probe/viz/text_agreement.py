"""What the report says about the letter-vs-text agreement audit (`probe.metrics.agreement`),
read from `metrics.json`: a sentence per condition in plain words, a table per condition with
intervals, and the per-group shares where the two readings differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.metrics.core import get_path
from probe.viz.markdown import Footnotes, fmt, n_boot_of, table, undefined

NO_RANKING = "undefined: in every prompt one of the readings ties all options, so it ranks nothing"
NO_PICK = "undefined: neither reading picks an option of this group in any prompt"
NO_SHARE = "undefined: no choice probability fell on any shown group of this condition"
NO_DEBIASED = "no debiased letters: the run's letter prior could not be estimated (see above)"


def agreement_section(metrics: Mapping[str, Any]) -> str:
    """`## Letters and answer text`: per condition how often the two readings pick the same option,
    how alike they rank the options, how far apart their group shares are — empty for a run
    without a text reading."""
    block = metrics.get("agreement")
    if not block:
        return ""
    cis = (metrics.get("ci95") or {}).get("agreement") or {}
    lines = ["", "## Letters and answer text", "",
             "The same prompts read twice: by the letter of each option and by the log-likelihood of the option's "
             "text as the answer (lm-eval's `acc` score). `argmax`: the share of prompts where both readings pick "
             "the same option; `spearman`: the mean per-prompt rank correlation of the options' scores; `JSD`: the "
             "Jensen–Shannon divergence (bits) between the two readings' exposure-normalised group shares. "
             "`debiased`: the same with the letter prior removed. The `text` and `text_norm` (per byte) blocks of "
             "`metrics.json` hold every metric of the text reading.", ""]
    lines += [f"- {sentence(cond, v, cis.get(cond) or {})}" for cond, v in block.items()]
    notes, n_boot = Footnotes(), n_boot_of(metrics)
    rows = []
    for cond, v in block.items():
        for reading, path in (("letters", ""), ("debiased letters", "debiased")):
            tree = get_path(v, path) if path else v
            if path and tree is None:
                rows.append([cond, reading, *([notes.gap(NO_DEBIASED)] * 3)])
                continue
            ci_tree = (get_path(cis.get(cond), path) if path else cis.get(cond)) or {}
            rows.append([cond, reading, *(_cell(tree.get(k), ci_tree.get(k), notes, n_boot, why)
                                          for k, why in (("argmax", NO_RANKING), ("spearman", NO_RANKING),
                                                         ("JSD", NO_SHARE)))])
    lines += ["", *table(["condition", "letter reading", "argmax agreement [95% CI]", "Spearman [95% CI]",
                          "JSD bits [95% CI]"], rows), *notes.lines()]
    return "\n".join(lines + _group_tables(block, cis, n_boot)) + "\n"


def sentence(cond: str, v: Mapping[str, Any], cis: Mapping[str, Any]) -> str:
    """`C0: letters and text pick the same option in 62% of 96 prompts [51%, 70%] (debiased: …).`"""
    def pct(value: Any, interval: Any) -> str:
        if undefined(value):
            return "–"
        band = f" [{interval[0]:.0%}, {interval[1]:.0%}]" if interval and not undefined(interval[0]) else ""
        return f"{value:.0%}{band}"

    text = (f"{cond}: letters and text pick the same option in {pct(v.get('argmax'), cis.get('argmax'))} of "
            f"{v.get('n_prompts')} prompts")
    deb = v.get("debiased")
    if deb is not None:
        text += (f" ({pct(deb.get('argmax'), (cis.get('debiased') or {}).get('argmax'))} with the letter prior "
                 "removed)")
    return text + f"; their group shares differ by {fmt(v.get('JSD'))} bits of JSD."


def _cell(value: Any, interval: Any, notes: Footnotes, n_boot: int | None, why: str) -> str:
    if undefined(value):
        return notes.gap(why)
    return f"{fmt(value)} {notes.interval(interval, value, why, n_boot)}" if n_boot else fmt(value)


def _group_tables(block: Mapping[str, Any], cis: Mapping[str, Any], n_boot: int | None) -> list[str]:
    """Per condition: each group's argmax agreement and its share under each reading."""
    lines = ["", "Per group: `argmax` among the prompts where either reading picks the group, the share where both do; "
             "CSD under each reading and letters − text (> 0: the letters favour the group more than the text does)."]
    for cond, v in block.items():
        notes, rows = Footnotes(), []
        for group, g in (v.get("by_group") or {}).items():
            gci = (((cis.get(cond) or {}).get("by_group") or {}).get(group)) or {}
            rows.append([group, _cell(g.get("argmax"), gci.get("argmax"), notes, n_boot, NO_PICK),
                         fmt(g.get("CSD_letters")), fmt(g.get("CSD_text")),
                         _cell(g.get("CSD_diff"), gci.get("CSD_diff"), notes, n_boot, NO_SHARE)])
        lines += ["", f"### {cond}", "", *table(["group", "argmax agreement [95% CI]", "CSD letters", "CSD text",
                                                  "letters − text [95% CI]"], rows), *notes.lines()]
    return lines


def choice_agreement_markdown(block: Mapping[str, Any], cis: Mapping[str, Any], n_boot: int) -> str:
    """`probe.commands.compare … agreement=true`: per condition and reading of the scored run, how often its
    pick is the generated answer, and the JSD of their group shares."""
    notes, rows = Footnotes(), []
    for cond, v in block.items():
        for reading in ("letters", "debiased", "text"):
            if reading in v:
                ci_tree = (cis.get(cond) or {}).get(reading) or {}
                rows.append([cond, v["n_prompts"], reading,
                             *(_cell(v[reading].get(k), ci_tree.get(k), notes, n_boot, why)
                               for k, why in (("argmax", NO_RANKING), ("JSD", NO_SHARE)))])
    head = ["condition", "prompts", "reading of A", "picks B's generated answer [95% CI]", "JSD bits [95% CI]"]
    return "\n".join(["", "Agreement with B's generated answers (prompts with a valid answer):", "",
                      *table(head, rows), *notes.lines()]) + "\n"
