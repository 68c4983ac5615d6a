"""The LocQA markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.benches.locqa.conclusion import opening
from probe.metrics.core import get_path
from probe.viz.markdown import Footnotes, n_boot_of, table

UNDEFINED = "undefined: no usable (judged) response counts towards it"
NO_LOCAL = "undefined: the language's responses never give one of its locales' answers, so B_R's shares are undefined"


def report(m: Mapping[str, Any]) -> str:
    """Markdown: the conclusion and terms, the headline numbers, per-language B_US and |B_R − 1|, the taxonomy."""
    M, cis, n_boot, notes = m["metrics"], m.get("ci95", {}), n_boot_of(m), Footnotes()

    def cells(label: str, path: str) -> list[str]:
        value = get_path(M, path)
        return [label, notes.value(value, UNDEFINED), notes.interval(get_path(cis, path), value, UNDEFINED, n_boot)]

    rows = [cells("B_US macro (11 non-English languages)", "B_US_macro"),
            cells("mean |B_R − 1| macro", "B_R_dev_macro"),
            cells("no-answer rate (all languages, as the paper)", "no_answer_rate"),
            cells("no-answer rate (non-English)", "no_answer_rate_non_english"),
            cells("answer multiplicity", "multiplicity")]
    rows += [cells(f"taxonomy: {k}", f"taxonomy.{k}") for k in M["taxonomy"]]
    rows += [cells(f"explicit: {k}", f"explicit.{k}") for k in M.get("explicit", {})]
    lines = [f"# LocQA — {m['model']} on `{m['bench']}` ({m.get('mode')})", "", *opening(m),
             f"{m['n_prompts']} prompts; {m.get('n_judge_errors', 0)} judge errors (excluded, counted).", "",
             *table(["metric", "value", "95% CI"], rows), *notes.lines()]
    notes = Footnotes()
    rows = [[lang, notes.value(v, UNDEFINED),
             notes.value(M["B_R_dev"].get(lang), NO_LOCAL)]
            for lang, v in M["B_US"].items()]
    lines += ["", *table(["language", "B_US", "mean |B_R − 1|"], rows), *notes.lines()]
    return "\n".join(lines) + "\n"
