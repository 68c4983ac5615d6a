"""The OpinionQA markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.metrics.core import get_path
from probe.viz.markdown import fmt, table, value_ci

READING = ("Representativeness = 1 − W1(model, group)/(N − 1) on the options' ordinal positions (Santurkar et al. "
           "2023), 1 − JSD = 1 − Jensen–Shannon distance (base 2) beside it; per group the mean over the questions "
           "it answered. The human ceiling is the value expected between two independent samples of the group at "
           "its size: a model cannot be expected to come closer to a group than the group's own next survey. "
           "Intervals (95%) resample questions and, where the file gives counts, redraw each group's answers "
           "(multinomial, the weighted counts' sum as effective n).")


def _v(m: Mapping[str, Any], *path: str) -> str:
    return value_ci(get_path(m, "expected", *path), get_path(m, "ci95", "expected", *path))


def _group_rows(m: Mapping[str, Any]) -> list[list[Any]]:
    reps = get_path(m, "expected", "default", "representativeness") or {}
    jsd = get_path(m, "expected", "default", "jsd_similarity") or {}
    rows = []
    for attribute in dict.fromkeys([*reps, *jsd]):
        for group in dict.fromkeys([*(reps.get(attribute) or {}), *(jsd.get(attribute) or {})]):
            ceil = get_path(m, "human_ceiling", attribute, group) or {}
            rows.append([attribute, group, get_path(m, "n_questions", attribute, group),
                         fmt(get_path(m, "respondents", attribute, group), 0),
                         _v(m, "default", "representativeness", attribute, group), fmt(ceil.get("representativeness")),
                         _v(m, "default", "jsd_similarity", attribute, group), fmt(ceil.get("jsd_similarity")),
                         fmt(get_path(m, "debiased", "default", "representativeness", attribute, group)),
                         fmt(get_path(m, "greedy", "default", "representativeness", attribute, group))])
    return rows


def _naming(m: Mapping[str, Any]) -> str:
    n = m.get("naming") or {}
    if n.get("p_value") is None:
        return f"No group is named closest or furthest ({n.get('why') or 'no test'})."
    said = [f"closest: **{n['closest']}**" if n.get("closest") else "no closest group named",
            f"furthest: **{n['furthest']}**" if n.get("furthest") else "no furthest group named"]
    return (f"Test that all groups are equally close ({n['measure']}, groups with ≥ {n['min_questions']} questions): "
            f"p = {n['p_value']:.3g}; " + "; ".join(said) + " (named only when the test rejects at 5% and the group's "
            "simultaneous 95% interval of its deviation from the groups' mean excludes 0)." +
            ("" if n.get("why") is None else f" {n['why']}."))


def _steer_section(m: Mapping[str, Any]) -> list[str]:
    tree = m.get("expected") or {}
    formats = [f for f in ("qa", "bio", "portray") if f in tree]
    if not formats:
        return []
    out = ["", "## Persona steering", "",
           "Steerability: representativeness toward a group under its own persona; placebo: toward the same group "
           "under the persona of another group of its attribute (mean over them); gain = steerability − placebo "
           "(a persona that moves the model alike whatever it names gains nothing).", ""]
    for f in formats:
        out += [f"### {f.upper()}", "", f"Mean steerability {_v(m, f, 'mean', 'steerability')}, placebo "
                f"{_v(m, f, 'mean', 'placebo')}, gain {_v(m, f, 'mean', 'gain')}.", ""]
        rows = [[a, g, _v(m, f, "steerability", a, g), _v(m, f, "placebo", a, g), _v(m, f, "gain", a, g),
                 fmt(get_path(m, "expected", "default", "representativeness", a, g))]
                for a, by in (tree[f].get("steerability") or {}).items() for g in by]
        out += table(["attribute", "group", "steerability", "placebo", "gain", "default"], rows) + [""]
    return out


def report(m: Mapping[str, Any]) -> str:
    """The run's report body: the whole panel, the groups' table, the naming, persona steering."""
    lines = [f"# OpinionQA — {m['model']}", "",
             f"Overall representativeness (whole panel): {_v(m, 'default', 'overall', 'representativeness')}; "
             f"1 − JSD {_v(m, 'default', 'overall', 'jsd_similarity')}; mean over groups "
             f"{_v(m, 'default', 'mean', 'representativeness')}. {m['n_items']} questions, {m['n_prompts']} prompts.",
             "", _naming(m), "", "## Groups", "", READING, ""]
    lines += table(["attribute", "group", "questions", "respondents (median)", "representativeness", "human ceiling",
                    "1 − JSD", "human ceiling (JSD)", "debiased", "greedy"], _group_rows(m))
    lines += _steer_section(m)
    return "\n".join(lines) + "\n"
