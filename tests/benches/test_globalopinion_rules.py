"""GlobalOpinionQA's round-2 rules, in-process on planted data: countries by display name in the
cue, every refusal spelling and the volunteered class, the survey-order reading and the cue's
specificity on a hand-built score table (values worked out by hand), the ranking by lift with
countries listed apart, the conclusion's wording, and a factor run's country cube."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_dir
from test_globalopinion_data import row, subset, write

from probe.benches.globalopinion.conclusion import opening
from probe.benches.globalopinion.countries import display_name, sample
from probe.benches.globalopinion.data import GlobalOpinionSpec, is_refusal, is_volunteered, load_questions
from probe.benches.globalopinion.factors import factor_cube, lifts
from probe.benches.globalopinion.measures import ordinal_similarity, similarity
from probe.benches.globalopinion.metrics import compute
from probe.benches.globalopinion.prompts import build_prompts, render_message
from probe.benches.globalopinion.ranking import ranking_block
from probe.benches.globalopinion.report import report
from probe.benches.globalopinion.task import DESIGN
from probe.metrics.core import AnalysisOptions
from probe.prompts.variants import Wording
from probe.results.scores import ScoreTable

SURVEY_LABELS = re.compile(r"sample\)|S\. Korea|S\. Africa|Palest\. ter\.|Czech Rep\.| SAR\b|Taiwan ROC")


def test_display_names_and_samples() -> None:
    assert display_name("Central African Rep.") == "Central African Republic" and display_name("S. Sudan") == "South Sudan"
    assert [display_name(c) for c in ("S. Korea", "Palest. ter.", "Czech Rep.", "Nigeria (Non-national sample)",
                                      "India (Old national sample)", "India (Current national sample)", "Britain")] \
        == ["South Korea", "the Palestinian territories", "the Czech Republic", "Nigeria", "India", "India", "Britain"]
    assert [sample(c) for c in ("Nigeria (Non-national sample)", "India (Old national sample)",
                                "India (Current national sample)", "Kenya")] \
        == ["non-national", "old national", "national", "national"]


@pytest.mark.skipif(shared_dir() is None, reason="needs the shared subset")
def test_no_cross_national_prompt_of_the_subset_holds_a_survey_label() -> None:
    questions, _ = load_questions(subset())
    labels = {c for q in questions for c, _ in q.shares}
    assert {"S. Korea", "Palest. ter.", "Czech Rep.", "Nigeria (Non-national sample)"} <= labels  # the test bites
    prompts = build_prompts(questions, ["cross_national"], 18)
    cues = {p.message.split("\n", 1)[0] for p in prompts}
    assert len(cues) == len({display_name(c) for c in labels})
    assert not [c for c in cues if SURVEY_LABELS.search(c)]
    assert "How would someone from South Korea answer the following question:" in cues
    # the design keeps the survey label: metrics stay keyed by it
    assert {p.value("target") for p in prompts} == labels


REFUSALS = ("DK/Refused", "Don't know", "Don't know/Refused", "No answer/refused", "No answer/Refused", "Refused",
            "Missing; Unknown", "Missing; Not available", "Other missing; Multiple answers Mail (EVS)", "Not asked",
            "Don’t know (VOL)", "DK/Refused (DO NOT READ)", "No answer", "Not applicable", "Missing")
KEPT = ("Neither (VOL)", "Other (VOL)", "Both (DO NOT READ)", "Not at all", "None at all", "Not too much",
        "No, never", "I do not know examples concerned", "Nature", "Refuse to pay taxes")


def test_every_refusal_spelling_is_one_class_and_volunteered_answers_another() -> None:
    assert [o for o in REFUSALS if not is_refusal(o)] == []
    assert [o for o in KEPT if is_refusal(o)] == []
    assert [o for o in KEPT[:3] if not is_volunteered(o)] == []
    assert not any(is_volunteered(o) for o in REFUSALS)  # a refusal marked (VOL) is a refusal


def test_drop_switches_remove_their_class_from_prompt_and_shares(tmp_path: Path) -> None:
    options = "['Yes', 'No', 'Neither (VOL)', 'No answer/refused', 'Missing; Unknown']"
    sel = "{'Kenya': [0.4, 0.2, 0.1, 0.2, 0.1]}"
    path = write(tmp_path, [row(selections=sel, options=options)])
    (q,), counts = load_questions(path, drop_refusals=True)
    assert [o.text for o in q.item.options] == ["Yes", "No", "Neither (VOL)"] and counts.refusal_options == 2
    assert np.allclose(q.shares[0][1], [4 / 7, 2 / 7, 1 / 7])
    (q,), counts = load_questions(path, drop_refusals=True, drop_volunteered=True)
    assert [o.text for o in q.item.options] == ["Yes", "No"] and counts.volunteered_options == 1
    assert np.allclose(q.shares[0][1], [2 / 3, 1 / 3])
    (q,), _ = load_questions(path)
    assert len(q.item.options) == 5  # the default keeps every option, as the paper does


@pytest.mark.skipif(shared_dir() is None, reason="needs the shared subset")
def test_drop_refusals_leaves_no_code_in_any_prompt_of_the_subset() -> None:
    questions, counts = load_questions(subset(), drop_refusals=True)
    prompts = build_prompts(questions, ["default"], 18)
    lines = {line[4:] for p in prompts for line in p.message.split("\n") if re.match(r"\([A-R]\) ", line)}
    assert counts.refusal_options > 900 and not [o for o in lines if is_refusal(o)]
    assert not lines & {"DK/Refused", "No answer/refused", "Missing; Unknown", "Don't know/Refused"}


def test_digit_labels_quote_numeric_options() -> None:
    text = render_message("Q?", ["Not at all", "2", "Very"], wording=Wording(labels=("1", "2", "3")))
    assert text.endswith('(1) Not at all\n(2) "2"\n(3) Very')
    assert render_message("Q?", ["Not at all", "2", "Very"]).endswith("(A) Not at all\n(B) 2\n(C) Very")


def test_ordinal_similarity_by_hand() -> None:
    assert ordinal_similarity(np.array([1.0, 0, 0]), np.array([0, 0, 1.0])) == 0.0
    # CDFs (0.5, 1.0) vs (0, 0.5): W1 = 0.5 + 0.5 = 1, K − 1 = 2
    assert math.isclose(float(ordinal_similarity(np.array([0.5, 0.5, 0]), np.array([0, 0.5, 0.5]))), 0.5)


# --- the survey-order reading and the cue's specificity on a planted score table ---

H = {"X": np.array([0.7, 0.2, 0.1]), "Y": np.array([0.1, 0.3, 0.6])}
P = {None: np.array([0.5, 0.3, 0.2]), "X": np.array([0.6, 0.3, 0.1]), "Y": np.array([0.2, 0.3, 0.5])}
"""The planted model: its distribution over the letters A, B, C (the same under every rotation)."""


def planted() -> tuple[ScoreTable, dict[str, dict[str, np.ndarray]]]:
    """One question, 3 options, countries X and Y: `default` and a cue per country, 3 rotations each."""
    rows = [(c, t, r) for c, t in (("default", None), ("cross_national", "X"), ("cross_national", "Y"))
            for r in range(3)]
    order = np.array([[(i + r) % 3 for i in range(3)] for _, _, r in rows])
    n = len(rows)
    table = ScoreTable(prompt_id=np.arange(n), item_id=np.array(["q1"] * n, dtype=object),
                       design={"condition": np.array([c for c, _, _ in rows], dtype=object),
                               "target": np.array([t for _, t, _ in rows], dtype=object),
                               "rotation": np.array([r for _, _, r in rows], dtype=np.int64),
                               "human": np.array([None] * n, dtype=object)},
                       groups=np.array([["o0", "o1", "o2"]] * n, dtype=object),
                       logprobs=np.log(np.stack([P[t] for _, t, _ in rows])).astype(np.float32),
                       greedy_valid=np.ones(n, bool), category=np.array(["GAS"] * n, dtype=object), order=order)
    return table, {"q1": H}


def option_dist(letters: np.ndarray, rotation: int) -> np.ndarray:
    """Letter probabilities → option probabilities under one rotation (option (i + r) mod 3 at letter i)."""
    out = np.zeros(3)
    for i in range(3):
        out[(i + rotation) % 3] = letters[i]
    return out


def test_survey_order_and_specificity_by_hand() -> None:
    table, human = planted()
    m = compute(table, AnalysisOptions(n_boot=0), human)["expected"]

    def sim(p: np.ndarray, q: np.ndarray) -> float:
        return float(similarity(p, q))

    # survey order = rotation 0: letter i shows option i
    assert math.isclose(m["default"]["survey_order"]["similarity"]["X"], sim(P[None], H["X"]), abs_tol=1e-6)
    assert math.isclose(m["cross_national"]["survey_order"]["similarity"]["Y"], sim(P["Y"], H["Y"]), abs_tol=1e-6)
    # the rotation-exact reading averages the three rotations: a letter-only model reads uniform
    flat = np.mean([option_dist(P[None], r) for r in range(3)], axis=0)
    assert np.allclose(flat, 1 / 3) and math.isclose(m["default"]["similarity"]["X"], sim(flat, H["X"]), abs_tol=1e-6)
    # specificity from the survey-order distributions' rotation means (every cue reads uniform here: 0)
    assert math.isclose(m["cross_national"]["mean"]["specificity"], 0.0, abs_tol=1e-6)


def test_specificity_of_a_content_reading_model_by_hand() -> None:
    """A model that reads the content (the same option distribution under every rotation)."""
    table, human = planted()
    lp = np.stack([np.log(option_dist(P[t], 0)[table.order[i]]) for i, t in enumerate(table.design["target"])])
    out = compute(ScoreTable(**{**table.__dict__, "logprobs": lp.astype(np.float32)}), AnalysisOptions(n_boot=0),
                  human)
    m = out["expected"]

    def s(t: str | None, c: str) -> float:
        return float(similarity(P[t], H[c]))

    # the placebo comparison: naming X against naming Y, both read against X's people
    spec_x, spec_y = s("X", "X") - s("Y", "X"), s("Y", "Y") - s("X", "Y")
    rel_x = (s("X", "X") - s("X", "Y")) - (s(None, "X") - s(None, "Y"))
    rel_y = (s("Y", "Y") - s("Y", "X")) - (s(None, "Y") - s(None, "X"))
    got = m["cross_national"]
    assert math.isclose(got["specificity"]["X"], spec_x, abs_tol=1e-6)
    assert math.isclose(got["specificity"]["Y"], spec_y, abs_tol=1e-6)
    assert math.isclose(got["mean"]["specificity"], (spec_x + spec_y) / 2, abs_tol=1e-6) and spec_x > 0
    assert math.isclose(got["relative_closeness"]["X"], rel_x, abs_tol=1e-6)
    assert math.isclose(got["relative_closeness"]["Y"], rel_y, abs_tol=1e-6)
    matrix = out["cue_matrix"]
    assert math.isclose(matrix["similarity"]["X"]["Y"], s("X", "Y"), abs_tol=1e-6)
    assert matrix["questions"] == {"X": {"X": 1, "Y": 1}, "Y": {"X": 1, "Y": 1}}
    lifts_ = [m["default"]["lift"][c] for c in "XY"]
    assert math.isclose(m["default"]["mean"]["macro_lift"], float(np.mean(lifts_)), abs_tol=1e-12)


# --- ranking, the conclusion ---

def metrics_of(lift: dict[str, float], n: dict[str, int], p: float | None = 0.001) -> dict:
    """Hand-made metrics; `p` the stored test of equal lifts (a country is named only below 0.05)."""
    sims = {c: 0.5 + v for c, v in lift.items()}
    tree = {"default": {"lift": lift, "similarity": sims, "uniform": dict.fromkeys(lift, 0.5),
                        "mean": {"lift": 0.01, "similarity": 0.5, "uniform": 0.49, "macro_lift": 0.02}}}
    return {"bench": "globalopinion", "model": "m", "expected": tree, "debiased": tree, "n_questions": {"default": n},
            "ci95": {}, "n_items": 9, "n_prompts": 90, "n_pairs": {"default": sum(n.values())},
            **({} if p is None else {"p": {b: {"default": {"lift": p}} for b in ("expected", "debiased")}})}


def test_ranking_leaves_out_thin_and_non_national_countries() -> None:
    lift = {"Mexico": 0.3, "Nigeria (Non-national sample)": 0.2, "Kenya": 0.1, "S. Korea": -0.1, "Chile": 0.05}
    n = {"Mexico": 1, "Nigeria (Non-national sample)": 9, "Kenya": 6, "S. Korea": 5, "Chile": 7}
    m = metrics_of(lift, n)
    block = ranking_block(m, GlobalOpinionSpec())
    assert block["ranked"] == ["Kenya", "Chile", "S. Korea"]
    assert block["apart"] == {"Mexico": "1 question (< 5)", "Nigeria (Non-national sample)": "non-national sample"}
    assert ranking_block(m, GlobalOpinionSpec(rank_samples="all", min_questions=1))["ranked"][:2] == \
        ["Mexico", "Nigeria (Non-national sample)"]
    m["ranking"] = block
    text = report(m)
    bold = re.findall(r"\*\*([^*]+)\*\*", text.split("\n")[2].removeprefix("**In short:**"))
    assert bold == ["Kenya", "South Korea", "Kenya", "South Korea"]  # expected and debiased readings
    assert "0.300 (n = 1, no interval)" in text and "[0.300, 0.300]" not in text
    assert "| Nigeria (`Nigeria (Non-national sample)`), *non-national sample* |" in text
    for p in (0.5, None):  # the test does not reject, or none was stored: no country is named
        quiet = {**metrics_of(lift, n, p), "ranking": block}
        first = report(quiet).split("\n")[2]
        assert "**" not in first.removeprefix("**In short:**") and "no country is singled out" in first


def test_a_run_with_no_ranked_country_says_so() -> None:
    m = metrics_of({"Kenya": 0.1, "Chile": 0.0}, {"Kenya": 2, "Chile": 1})
    m["ranking"] = ranking_block(m, GlobalOpinionSpec())
    text = report(m)
    assert "so no country is ranked; mean lift 0.010." in text and "**" not in text.split("\n")[2][13:]
    assert "Debiased reading (letter prior removed): mean lift 0.010." in text
    assert "No country is ranked (the countries listed apart below say why)." in text and "| rank |" not in text


def test_no_measurable_opinion_is_said_so() -> None:
    m = metrics_of({"Kenya": 0.1, "Chile": 0.0}, {"Kenya": 5, "Chile": 5})
    m["ranking"] = ranking_block(m, GlobalOpinionSpec())
    m["letter_warnings"] = [{"condition": "default"}]
    m["letter_split"] = {"default (K=2)": {"content": 0.01}, "default (K=3)": {"content": 0.02}}
    assert "content explains 1.5% of the log-prob variance on average: the model shows no measurable opinion" \
        in opening(m)[0]
    m["letter_split"] = {"default (K=2)": {"content": 0.4}}
    assert opening(m)[0].endswith("the debiased reading is the one that speaks about the countries.")


# --- a factor run analyses countries ---

def test_factor_cube_groups_are_countries_and_its_response_the_lift() -> None:
    table, human = planted()
    two = ScoreTable(**{**table.__dict__,
                        "prompt_id": np.arange(18), "item_id": np.concatenate([table.item_id] * 2),
                        "design": {**{k: np.concatenate([v] * 2) for k, v in table.design.items()},
                                   "human": np.array([_json(human)] + [None] * 17, dtype=object),
                                   "variant": np.repeat([0, 1], 9)},
                        "groups": np.concatenate([table.groups] * 2), "greedy_valid": np.ones(18, bool),
                        "category": np.concatenate([table.category] * 2), "order": np.concatenate([table.order] * 2),
                        "logprobs": np.concatenate([table.logprobs, np.log(np.full((9, 3), 1 / 3, np.float32))])})
    frame = lifts(two, DESIGN, ["protocol", "flat"])
    assert sorted(set(frame["group"])) == ["X", "Y"] and len(frame) == 4  # default condition only
    flat = frame[frame["variant"] == "flat"].set_index("group")["lift"]
    assert np.allclose(flat, 0.0, atol=1e-6)  # a uniform model has lift 0 by definition
    cube = factor_cube(two, DESIGN, ["protocol", "flat"])
    assert cube.groups == ("X", "Y") and np.allclose(cube.shares.sum(-1), 1.0)
    lx, ly = (frame[(frame["variant"] == "protocol") & (frame["group"] == c)]["lift"].item() for c in "XY")
    mean = (lx + ly) / 2
    assert np.allclose(cube.shares[0, 0], [(1 + lx) / (2 * (1 + mean)), (1 + ly) / (2 * (1 + mean))])


def _json(human: dict[str, dict[str, np.ndarray]]) -> str:
    import json

    return json.dumps({c: list(v) for c, v in human["q1"].items()})


def test_scales_are_recognised_and_read_ordinally() -> None:
    from probe.benches.globalopinion.scales import scale_positions

    assert scale_positions(["Very good", "Somewhat good", "Somewhat bad", "Very bad", "DK/Refused"]) == (0, 1, 2, 3)
    assert scale_positions(["Not at all", "2", "3", "4", "Very much", "No answer"]) == (0, 1, 2, 3, 4)
    assert scale_positions(["A great deal", "Quite a lot", "Not very much", "None at all"]) == (0, 1, 2, 3)
    assert scale_positions(["Yes", "No", "Maybe"]) is None and scale_positions(["Good", "Bad"]) is None
    assert scale_positions(["Very good", "Very bad", "Somewhat good"]) is None  # a scrambled scale is no scale
    table, human = planted()
    texts = ["Very good", "Somewhat good", "Very bad"]
    lp = np.stack([np.log(option_dist(P[t], 0)[table.order[i]]) for i, t in enumerate(table.design["target"])])
    scale = ScoreTable(**{**table.__dict__, "logprobs": lp.astype(np.float32),
                          "groups": np.array([[texts[o] for o in row] for row in table.order], dtype=object)})
    m = compute(scale, AnalysisOptions(n_boot=0), human)
    got = m["expected"]["default"]["ordinal"]
    assert m["n_scale_questions"] == 1
    assert math.isclose(got["similarity"]["X"], float(ordinal_similarity(P[None], H["X"])), abs_tol=1e-6)
    assert math.isclose(got["jsd_similarity"]["Y"], float(similarity(P[None], H["Y"])), abs_tol=1e-6)
    assert "ordinal" not in compute(table, AnalysisOptions(n_boot=0), human)["expected"]["default"]


def test_a_base_model_gets_a_space_before_the_prefill(tmp_path: Path) -> None:
    from probe.benches.globalopinion.prompts import PREFILL
    from probe.benches.globalopinion.task import prepare
    from probe.prompts.render import RenderSettings, render_text

    bench = prepare(GlobalOpinionSpec(path=str(write(tmp_path, [row()]))), False, tmp_path / "cache")
    assert bench.base_joiner == " "
    text = render_text(None, bench.prompts[0], RenderSettings(kind="base", cue=bench.cue, base_joiner=bench.base_joiner))
    assert text.endswith(f"\n\nAssistant: {PREFILL}") and text.startswith("Human: Is it good?\n\n")
