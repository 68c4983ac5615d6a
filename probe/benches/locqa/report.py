"""The LocQA markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from typing import Any

from probe.metrics.core import get_path
from probe.viz.markdown import fmt


def report(m: dict[str, Any]) -> str:
    """Markdown: the headline numbers, per-language B_US and |B_R − 1|, the taxonomy."""
    M, ci = m["metrics"], m.get("ci95", {})

    f = fmt

    def c(path: str) -> str:
        node = get_path(ci, path)
        return "–" if not node or node[0] is None else f"[{node[0]:.3f}, {node[1]:.3f}]"

    lines = [f"# LocQA — {m['model']} on `{m['bench']}` ({m.get('mode')})", "",
             f"{m['n_prompts']} prompts; {m.get('n_judge_errors', 0)} judge errors (excluded, counted).", "",
             "| metric | value | 95% CI |", "|---|---|---|",
             f"| B_US macro (11 non-English languages) | {f(M['B_US_macro'])} | {c('B_US_macro')} |",
             f"| mean \\|B_R − 1\\| macro | {f(M['B_R_dev_macro'])} | {c('B_R_dev_macro')} |",
             f"| no-answer rate (all languages, as the paper) | {f(M['no_answer_rate'])} | {c('no_answer_rate')} |",
             f"| no-answer rate (non-English) | {f(M.get('no_answer_rate_non_english'))} | "
             f"{c('no_answer_rate_non_english')} |",
             f"| answer multiplicity | {f(M['multiplicity'])} | {c('multiplicity')} |"]
    lines += [f"| taxonomy: {k} | {f(v)} | {c('taxonomy.' + k)} |" for k, v in M["taxonomy"].items()]
    if "explicit" in M:
        lines += [f"| explicit: {k} | {f(v)} | {c('explicit.' + k)} |" for k, v in M["explicit"].items()]
    lines += ["", "| language | B_US | mean \\|B_R − 1\\| |", "|---|---|---|"]
    lines += [f"| {lang} | {f(v)} | {f(M['B_R_dev'].get(lang))} |" for lang, v in M["B_US"].items()]
    return "\n".join(lines) + "\n"
