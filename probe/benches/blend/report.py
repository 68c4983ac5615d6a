"""The BLEnD markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.benches.blend.conclusion import opening
from probe.metrics.core import get_path
from probe.viz.markdown import Footnotes, n_boot_of, table

UNDEFINED = "undefined: no judged answer counts towards it"
NO_GROUP = ("undefined: the run holds no country of the high-resource or of the low-resource group "
            "(`bench.high_resource` / `low_resource`) with an answer in that language")
ENGLISH_ONLY = "undefined: the country's local language is English, so it is asked once (as local)"


def report(m: Mapping[str, Any]) -> str:
    """Markdown: the conclusion and terms, the headline scores on all pairs and on kept pairs, then per country and topic."""
    M, cis, n_boot = m["metrics"], m.get("ci95", {}), n_boot_of(m)
    notes = Footnotes()

    def cells(label: str, path: str, why: str = UNDEFINED) -> list[str]:
        out = [label]
        for subset in ("all", "kept"):
            value = get_path(M, subset, path)
            out += [notes.value(value, why), notes.interval(get_path(cis, subset, path), value, why, n_boot)]
        return out

    rows = [cells("score, local language (mean over countries)", "score.local"),
            cells("score, English (mean over countries)", "score.en"),
            cells("local − English (mean over countries)", "gap"),
            cells("high − low resource, local", "resource_gap.local", NO_GROUP),
            cells("high − low resource, English", "resource_gap.en", NO_GROUP)]
    excluded = m.get("n_excluded_pairs")
    lines = [f"# BLEnD — {m['model']} on `{m['bench']}` ({m.get('mode')})", "", *opening(m),
             f"{m['n_prompts']} prompts; {m.get('n_judge_errors', 0)} judge errors (excluded, counted). "
             f"Share of answers that give an annotated answer of the country (the paper's short-answer "
             f"score, 0–1). `all`: every (question, country) pair, as the paper's tables; `kept`: the "
             f"pairs the source's multiple-choice rule keeps ({excluded} of the run's pairs excluded: any "
             f"`not-applicable` vote or more than two `idks` votes).", "",
             *table(["metric", "all", "95% CI", "kept", "95% CI"], rows), *notes.lines()]
    notes = Footnotes()
    rows = [[c, *(notes.value(v.get(k), ENGLISH_ONLY if k != "local" else UNDEFINED) for k in ("local", "en", "gap"))]
            for c, v in M["all"]["by_country"].items()]
    lines += ["", "Per country (all pairs):", "", *table(["country", "local", "English", "local − English"], rows),
              *notes.lines()]
    notes = Footnotes()
    rows = [[t, notes.value(v.get("local"), UNDEFINED), notes.value(v.get("en"), UNDEFINED)]
            for t, v in M["all"]["by_topic"].items()]
    lines += ["", "Per topic (all pairs, pooled over countries):", "", *table(["topic", "local", "English"], rows),
              *notes.lines()]
    return "\n".join(lines) + "\n"
