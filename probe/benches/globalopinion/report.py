"""The GlobalOpinionQA markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.benches.globalopinion.conclusion import at, condition, opening
from probe.metrics.core import get_path
from probe.viz.markdown import fmt, table, value_ci

UNIFORM_NOTE = ("`uniform` is the similarity of a model answering every option with probability 1/K; `lift` = "
                "similarity − uniform. A country whose respondents split evenly is close to any spread-out "
                "model, so read a ranking by its lifts as much as by its similarities.")


def _ranked(m: Mapping[str, Any], tree: str = "expected") -> list[tuple[str, float]]:
    sim = get_path(m, tree, "default", "similarity") or get_path(m, tree, "cross_national", "similarity") or {}
    return sorted(sim.items(), key=lambda kv: -kv[1])


def _cell(m: Mapping[str, Any], *path: str) -> str:
    return value_ci(get_path(m, "expected", *path), get_path(m, "ci95", "expected", *path))


def _country(m: Mapping[str, Any], cond: str, block: str, country: str) -> str:
    """A country's expected value with its interval."""
    return value_ci(at(m, country, "expected", cond, block), at(m, country, "ci95", "expected", cond, block))


def _country_table(m: Mapping[str, Any], show: int = 15) -> list[str]:
    cond, ranked = condition(m), _ranked(m)
    deb = get_path(m, "debiased", cond, "similarity") or {}
    gain = get_path(m, "expected", "cross_national", "gain") or {}
    n = get_path(m, "n_questions", cond) or {}
    rows = [[i + 1, c, n.get(c, "–"), _country(m, cond, "similarity", c), fmt(at(m, c, "expected", cond, "uniform")),
             _country(m, cond, "lift", c), fmt(at(m, c, "greedy", cond, "similarity")), fmt(deb.get(c)),
             _country(m, "cross_national", "gain", c) if c in gain else "–"]
            for i, (c, _) in enumerate(ranked)]
    if len(rows) > 2 * show:
        rows = rows[:show] + [["…"] * 9] + rows[-show:]
    head = ["rank", "country", "questions", "similarity (expected)", "uniform", "lift", "greedy", "debiased", "cue gain"]
    return table(head, rows)


def _source_table(m: Mapping[str, Any]) -> list[str]:
    cond = condition(m)
    by = get_path(m, "expected", cond, "by_source") or {}
    return table(["survey", "similarity", "uniform", "lift"],
                 [[s, _cell(m, cond, "by_source", s, "similarity"), fmt(by[s]["uniform"]),
                   _cell(m, cond, "by_source", s, "lift")] for s in sorted(by)])


def _warnings(m: Mapping[str, Any]) -> list[str]:
    out = []
    if m.get("near_uniform"):
        out.append(f"> **Near-uniform model.** Its per-question distributions have mean normalised entropy "
                   f"{fmt(m.get('model_entropy'))} (1 = uniform): the similarity then mostly tracks how evenly each "
                   "country's respondents split, not what the model thinks. Read the lifts, not the ranking.")
    return out


def report(m: Mapping[str, Any]) -> str:
    """`report.md`: the conclusion and terms, warnings, the ranked countries, the cue's gain, the
    per-survey means."""
    lines = [f"# {m['bench']} — {m['model']}", "", *opening(m), *_warnings(m)]
    lines += ["", "## Countries ranked by similarity", "",
              "Similarity = 1 − Jensen–Shannon distance (base 2) between the model's distribution over the "
              "question's options (mean over its K rotations) and the country's answer shares; mean over the "
              "country's questions, 95% bootstrap CIs over questions. " + UNIFORM_NOTE, "", *_country_table(m)]
    tau = m.get("ranking_tau")
    lines += ["", f"Kendall's τ between the expected and the debiased (letter prior removed) rankings: {fmt(tau)}."]
    if get_path(m, "expected", "cross_national", "gain"):
        lines += ["", "## Naming the country (cross_national)", "",
                  "`cue gain` = a country's similarity when the question is cued with it (\"How would someone from "
                  "{country} answer …\") minus its similarity under `default`, paired over questions; mean "
                  f"{_cell(m, 'cross_national', 'mean', 'gain')}."]
    lines += ["", "## By survey", "", *_source_table(m)]
    pairs = m.get("n_pairs") or {}
    lines += ["", f"{m.get('n_items')} questions, {m.get('n_prompts')} prompts; (question, country) pairs: "
              + ", ".join(f"{c} {n}" for c, n in pairs.items()) + "."]
    return "\n".join(lines) + "\n"
