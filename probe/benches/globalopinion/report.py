"""The GlobalOpinionQA markdown report, rendered only from a run's `metrics.json`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.benches.globalopinion.conclusion import at, condition, opening, ranked
from probe.benches.globalopinion.countries import sample, table_name
from probe.metrics.core import get_path
from probe.viz.markdown import fmt, table, undefined, value_ci

UNIFORM_NOTE = ("`uniform` is the similarity of a model answering every option with probability 1/K; `lift` = "
                "similarity − uniform. Countries are ranked by lift: a country whose respondents split evenly is "
                "close to any spread-out model, so a ranking by similarity is mostly the uniform model's.")
SAMPLE_MARK = {"non-national": "non-national sample", "old national": "old national sample", "national": ""}


def _label(m: Mapping[str, Any], c: str) -> str:
    """A country's table cell: its display name, the survey label beside it when they differ, and
    its sample when not national."""
    info = (m.get("countries") or {}).get(c) or {}
    name = info.get("name") or table_name(c)
    mark = SAMPLE_MARK[info.get("sample") or sample(c)]
    return name + (f" (`{c}`)" if name != c else "") + (f", *{mark}*" if mark else "")


def _value(m: Mapping[str, Any], c: str, block: str, cond: str, key: str) -> str:
    """A country's value with its interval; a country with one question shows no interval."""
    v = at(m, c, block, cond, key)
    if undefined(v):
        return "–"
    if at(m, c, "n_questions", cond) == 1:
        return f"{v:.3f} (n = 1, no interval)"
    return value_ci(v, at(m, c, "ci95", block, cond, key))


def _country_table(m: Mapping[str, Any], show: int = 15) -> list[str]:
    cond = condition(m)
    n = get_path(m, "n_questions", cond) or {}
    cross = get_path(m, "expected", "cross_national") or {}
    rows = [[i + 1, _label(m, c), n.get(c, "–"), _value(m, c, "expected", cond, "lift"),
             _value(m, c, "expected", cond, "similarity"), fmt(at(m, c, "expected", cond, "uniform")),
             fmt((get_path(m, "expected", cond, "survey_order", "lift") or {}).get(c)),
             fmt(at(m, c, "debiased", cond, "lift")), fmt(at(m, c, "greedy", cond, "lift")),
             _value(m, c, "expected", "cross_national", "gain") if c in (cross.get("gain") or {}) else "–",
             _value(m, c, "expected", "cross_national", "specificity") if c in (cross.get("specificity") or {}) else "–"]
            for i, (c, _) in enumerate(ranked(m))]
    if len(rows) > 2 * show:
        rows = rows[:show] + [["…"] * 11] + rows[-show:]
    head = ["rank", "country", "questions", "lift (expected)", "similarity", "uniform", "lift, survey order",
            "lift, debiased", "lift, greedy", "cue gain", "cue specificity"]
    return table(head, rows)


def _apart_table(m: Mapping[str, Any]) -> list[str]:
    """The countries not ranked, with why and their values (one question: no interval)."""
    cond = condition(m)
    apart = (m.get("ranking") or {}).get("apart") or {}
    lift = get_path(m, "expected", cond, "lift") or {}
    rows = [[_label(m, c), why, at(m, c, "n_questions", cond), _value(m, c, "expected", cond, "lift"),
             _value(m, c, "expected", cond, "similarity")]
            for c, why in sorted(apart.items(), key=lambda kv: -(lift.get(kv[0]) or 0.0))]
    return table(["country", "not ranked: why", "questions", "lift (expected)", "similarity"], rows)


def _source_table(m: Mapping[str, Any]) -> list[str]:
    cond = condition(m)
    by = get_path(m, "expected", cond, "by_source") or {}

    def cell(*path: str) -> str:
        return value_ci(get_path(m, "expected", cond, *path), get_path(m, "ci95", "expected", cond, *path))

    return table(["survey", "similarity", "uniform", "lift"],
                 [[s, cell("by_source", s, "similarity"), fmt(by[s]["uniform"]), cell("by_source", s, "lift")]
                  for s in sorted(by)])


def _means_table(m: Mapping[str, Any]) -> list[str]:
    """Pooled and macro means of each reading (expected, survey order, debiased)."""
    cond = condition(m)
    readings = [("expected (every rotation)", ("expected", cond)), ("survey order", ("expected", cond, "survey_order")),
                ("debiased", ("debiased", cond)), ("greedy", ("greedy", cond))]

    def cell(path: tuple[str, ...], key: str) -> str:
        return value_ci(get_path(m, *path, "mean", key), get_path(m, "ci95", *path, "mean", key))

    return table(["reading", "similarity", "lift", "macro similarity", "macro lift"],
                 [[name, cell(p, "similarity"), cell(p, "lift"), cell(p, "macro_similarity"), cell(p, "macro_lift")]
                  for name, p in readings if get_path(m, *p) is not None])


def _taus(m: Mapping[str, Any]) -> str:
    words = {"ranking_tau": "debiased", "survey_order_tau": "survey-order", "uniform_tau": "uniform model's similarity",
             "similarity_tau": "raw similarity"}
    return ("Kendall's τ between the ranked countries' expected lifts and: "
            + "; ".join(f"the {w} ranking {fmt(m.get(k))}" for k, w in words.items())
            + " (the uniform model's ranking near 0: the ranking is not the uniform model's).")


def _ordinal_section(m: Mapping[str, Any]) -> list[str]:
    """The ordinal similarity on the questions that are ordered scales, beside 1 − JS distance."""
    cond = condition(m)
    if get_path(m, "expected", cond, "ordinal") is None:
        return []

    def cell(key: str) -> str:
        return value_ci(get_path(m, "expected", cond, "ordinal", "mean", key),
                        get_path(m, "ci95", "expected", cond, "ordinal", "mean", key))

    return ["", "## Ordered scales", "",
            f"On the {m.get('n_scale_questions')} questions whose options form an ordered scale (numeric, or a "
            "verbal ladder such as very / somewhat / not too / not at all; non-answer and volunteered codes set "
            "aside), the ordinal similarity 1 − W1/(K − 1) over the survey's order (Santurkar et al. 2023) is "
            f"{cell('similarity')}, lift {cell('lift')} over a uniform model; 1 − JS distance on the same pairs "
            f"{cell('jsd_similarity')}. The two measures rank the ranked countries with τ = {fmt(m.get('ordinal_tau'))}."]


def _cue_section(m: Mapping[str, Any]) -> list[str]:
    if not get_path(m, "expected", "cross_national", "gain"):
        return []

    def mean(key: str) -> str:
        return value_ci(get_path(m, "expected", "cross_national", "mean", key),
                        get_path(m, "ci95", "expected", "cross_national", "mean", key))

    spec = ("" if get_path(m, "expected", "cross_national", "mean", "specificity") is None else
            f" `cue specificity` = sim(cue X, X) − mean over the question's other cued countries Y of sim(cue Y, X), "
            f"the placebo comparison (the same target X, another country named), over questions with at least two "
            f"cued countries: above 0, naming X brings the model closer to X's people than naming another country "
            f"does; a cue that moves the model alike whatever it names gives exactly 0; mean {mean('specificity')} (expected), "
            f"{value_ci(get_path(m, 'debiased', 'cross_national', 'mean', 'specificity'), get_path(m, 'ci95', 'debiased', 'cross_national', 'mean', 'specificity'))} (debiased).")
    return ["", "## Naming the country (cross_national)", "",
            "`cue gain` = a country's similarity when the question is cued with it (\"How would someone from "
            f"{{country}} answer …\") minus its similarity under `default`, paired over questions; mean {mean('gain')}."
            + spec]


def report(m: Mapping[str, Any]) -> str:
    """`report.md`: the conclusion and terms, warnings, the ranked countries and those listed
    apart, the readings' means and rank agreements, the cue's gain and specificity, the
    per-survey means."""
    lines = [f"# {m['bench']} — {m['model']}", "", *opening(m), *_warnings(m)]
    rank = m.get("ranking") or {}
    lines += ["", "## Countries ranked by lift", "",
              "Similarity = 1 − Jensen–Shannon distance (base 2) between the model's distribution over the "
              "question's options (mean over its K rotations) and the country's answer shares; mean over the "
              f"country's questions, 95% bootstrap CIs over questions. Ranked: countries with at least "
              f"{rank.get('min_questions')} questions (`bench.min_questions`)"
              + (", national samples only (`bench.rank_samples`)" if rank.get("samples") == "national" else "")
              + ". " + UNIFORM_NOTE, "",
              *(_country_table(m) if ranked(m) else
                ["No country is ranked (the countries listed apart below say why)."])]
    if rank.get("apart"):
        lines += ["", "## Countries listed apart (not ranked)", "", *_apart_table(m)]
    lines += ["", "## Readings", "", "Pooled means weight a country by its questions; macro means count each "
              "country once. Survey order: the options read once, in the survey's order (rotation 0).", "",
              *_means_table(m), "", _taus(m)]
    lines += _ordinal_section(m)
    lines += _cue_section(m)
    lines += ["", "## By survey", "", *_source_table(m)]
    lines += _wordings(m)
    pairs = m.get("n_pairs") or {}
    lines += ["", f"{m.get('n_items')} questions, {m.get('n_prompts')} prompts; (question, country) pairs: "
              + ", ".join(f"{c} {n}" for c, n in pairs.items()) + ". Similarities use base-2 logs: a "
              "reproduction with natural logs (scipy's `jensenshannon` default) has distances √ln 2 ≈ 0.83 times "
              "these, so higher similarities; compare like with like."]
    return "\n".join(lines) + "\n"


def _wordings(m: Mapping[str, Any]) -> list[str]:
    """A factor run's headline per wording: mean and macro lift of each variant, and their spread."""
    variants = (m.get("format") or {}).get("variants") or []
    if not variants:
        return []
    cond = condition(m)

    def cell(v: Mapping[str, Any], key: str) -> str:
        return value_ci(get_path(v, "expected", cond, "mean", key), get_path(v, "ci95", "expected", cond, "mean", key))

    lifts = [get_path(v, "expected", cond, "mean", "lift") for v in variants]
    lifts = [x for x in lifts if not undefined(x)]
    spread = f"{max(lifts) - min(lifts):.3f}" if lifts else "–"
    return ["", "## The mean lift across wordings", "",
            f"Each prompt variant's mean lift (`{cond}`, expected reading) with its 95% interval; spread over "
            f"wordings (max − min) {spread}. The factor analysis below reads countries: per (question, country), "
            "the lift under each variant.", "",
            *table(["variant", "mean lift", "macro lift", "similarity"],
                   [[v.get("name"), cell(v, "lift"), cell(v, "macro_lift"), cell(v, "similarity")] for v in variants])]


def _warnings(m: Mapping[str, Any]) -> list[str]:
    out = []
    if m.get("near_uniform"):
        out.append(f"> **Near-uniform model.** Its per-question distributions have mean normalised entropy "
                   f"{fmt(m.get('model_entropy'))} (1 = uniform): its lifts are near 0 and its ranking says little; "
                   "a ranking by similarity would be how evenly each country's respondents split.")
    return out
