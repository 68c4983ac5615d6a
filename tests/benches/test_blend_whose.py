"""BLEnD's whose-answer reading without a model: the neutral forms and candidates of the real
files (counted independently from the raw JSON), and the country distribution, compliance and
stickiness on hand-computed scores, shared answers included."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import blend_dir

from probe.benches.blend import data as blend
from probe.benches.blend import whose
from probe.benches.blend.whose_metrics import Reading, compute, masses


_real_root = blend_dir


@pytest.fixture(scope="module")
def real() -> blend.BlendData:
    root = _real_root()
    return blend.load(blend.resolve_files(blend.BlendSpec(path=str(root)), Path("unused")), templates=())


@pytest.fixture(scope="module")
def real_design(real: blend.BlendData) -> whose.WhoseDesign:
    return whose.design(real)


def _english(root: Path, qid: str) -> dict[str, str]:
    out = {}
    for c in blend.COUNTRIES:
        with (root / "questions" / f"{c}_questions.csv").open(encoding="utf-8-sig", newline="") as f:
            out[c] = next(r["Translation"].strip() for r in csv.DictReader(f) if r["ID"] == qid)
    return out


# --- neutral forms -------------------------------------------------------------------------------

@pytest.mark.parametrize(("qid", "neutral"), [
    ("Al-en-04", "What is the most popular fruit?"),  # "… in US?"
    ("Ca-sp-06", "Which is the most important meal of the day to people?"),  # "… to people from US?"
    ("New-az-60", "Who takes care of kids when both parents are working?"),  # "In US, who …?"
    ("Al-en-16", "At what age do kids start preschool? (Provide Arabic numerals (e.g., 12) only.)"),
])
def test_neutral_forms_of_real_questions(qid: str, neutral: str) -> None:
    versions = _english(_real_root(), qid)
    assert versions["North_Korea"] != versions["UK"]  # the country phrase is what differs
    assert whose.neutral_form(versions) == neutral


@pytest.mark.parametrize(("qid", "why"), [
    ("Sa-en-31", "What is {}'s most popular family pet?"),  # possessive: no phrase to drop
    ("Ni-en-15", None),  # UK asks about secondary school, the others about middle school
])
def test_questions_without_a_clean_neutral_form(qid: str, why: str | None) -> None:
    versions = _english(_real_root(), qid)
    if why is not None:
        assert versions["Spain"] == why.format("Spain")
    else:
        assert "secondary" in versions["UK"] and "middle" in versions["Spain"]
    assert whose.neutral_form(versions) is None


def test_neutral_form_rules_on_made_up_versions() -> None:
    assert whose.neutral_form({"US": "What do people from the US eat?", "Spain": "What do people from the Spain eat?"}
                              ) == "What do people eat?"
    assert whose.neutral_form({"US": "What is US known for?", "Spain": "What is Spain known for?"}) is None
    assert whose.neutral_form({"US": "What is eaten in US at weddings?", "UK": "What is eaten in UK at weddings?"}
                              ) == "What is eaten at weddings?"


def test_qualifying_questions_and_the_skip_list(real: blend.BlendData, real_design: whose.WhoseDesign) -> None:
    root = _real_root()
    raw = {c: json.loads((root / "annotations" / f"{c}_data.json").read_text(encoding="utf-8")) for c in blend.COUNTRIES}

    def qualifies(qid: str) -> bool:
        for c in blend.COUNTRIES:
            v = raw[c][qid]
            top = max(v["annotations"], key=lambda a: a["count"]) if v["annotations"] else None
            if (v["idks"].get("not-applicable", 0) or sum(v["idks"].values()) > 2 or top is None or top["count"] < 2
                    or not [a for a in top["en_answers"] if a.strip()]):
                return False
        return True

    expected = [q for q in raw["US"] if qualifies(q)]
    assert len(expected) == 87 and real_design.n_questions == 500
    assert sorted([q.qid for q in real_design.questions] + list(real_design.no_neutral)) == sorted(expected)
    assert real_design.no_neutral == ("Gu-ch-38", "Jo-sp-43", "New-ch-75", "Ni-en-06", "Ni-en-15", "Sa-en-31",
                                      "Tmp-ar-02")
    assert len(real_design.questions) == 80 and len(real_design.not_qualifying) == 500 - 87


def test_candidates_are_each_countrys_top_answer_shared_once(real_design: whose.WhoseDesign) -> None:
    root = _real_root()
    q = next(q for q in real_design.questions if q.qid == "Al-en-04")
    for c in blend.COUNTRIES:
        v = json.loads((root / "annotations" / f"{c}_data.json").read_text(encoding="utf-8"))["Al-en-04"]
        top = max(v["annotations"], key=lambda a: a["count"])["en_answers"][0].strip()
        assert whose.normalise(q.candidates[q.of_country[c]]) == whose.normalise(top)
    assert len(set(map(whose.normalise, q.candidates))) == len(q.candidates) == 8  # 16 countries, 8 distinct answers
    shared = [c for c in blend.COUNTRIES if q.of_country[c] == q.of_country["Algeria"]]
    assert len(shared) > 1


def test_prompts_ask_the_neutral_form_then_each_country(real_design: whose.WhoseDesign) -> None:
    first = whose.WhoseDesign(real_design.questions[:2], 500, (), ())
    prompts = whose.prompts(first)
    assert len(prompts) == 2 * 17 and [p.value("condition") for p in prompts[:2]] == ["neutral", "cued"]
    q = first.questions[0]
    assert prompts[0].value("target") is None and prompts[0].value("question") == q.neutral
    assert prompts[3].value("target") == "Azerbaijan" and prompts[3].value("question") == q.cued["Azerbaijan"]
    assert prompts[3].order == tuple(q.of_country[c] for c in blend.COUNTRIES) and prompts[3].groups == blend.COUNTRIES


# --- distributions and metrics, by hand ----------------------------------------------------------

def test_masses_split_a_shared_answer_equally() -> None:
    # countries A and C share answer x (score ln 3), B gives y (score 0): p_x = 3/4, p_y = 1/4
    order = np.array([[0, 1, 0]])
    scores = np.array([[math.log(3), 0.0, math.log(3)]])
    m = masses(scores, order, 1.0)
    assert m.country[0] == pytest.approx([0.375, 0.25, 0.375]) and m.answer[0] == pytest.approx([0.75, 0.25, 0.75])
    hot = masses(scores, order, 2.0)  # p_x ∝ √3
    assert hot.answer[0, 0] == pytest.approx(math.sqrt(3) / (math.sqrt(3) + 1))
    greedy = masses(scores, order, None)
    assert greedy.country[0] == pytest.approx([0.5, 0.0, 0.5]) and greedy.answer[0] == pytest.approx([1, 0, 1])


def test_compliance_stickiness_and_the_neutral_distribution_by_hand() -> None:
    # one question, countries A, B, C; A and C share answer x, B gives y
    # rows: neutral (p_x = .75), cue A (p_x = .5), cue B (p_x = .2), cue C (p_x = .9)
    px = np.array([0.75, 0.5, 0.2, 0.9])
    scores = np.stack([np.log(px), np.log(1 - px), np.log(px)], axis=1)
    r = Reading(scores=scores, order=np.tile([0, 1, 0], (4, 1)), item=np.zeros(4, int), target=np.array([-1, 0, 1, 2]),
                n_items=1)
    e = compute(r, ("A", "B", "C"), (("A",), ("C",)), 1.0, 0, 0)["expected"]
    assert [e["neutral"]["shares"][c] for c in "ABC"] == pytest.approx([0.375, 0.25, 0.375])
    assert e["neutral"]["KL"] == pytest.approx(2 * 0.375 * math.log(1.125) + 0.25 * math.log(0.75))
    assert e["neutral"]["gini"] == pytest.approx((4 - 2 * (3 * 0.25 + 2 * 0.375 + 0.375) / 1.0) / 3)
    assert e["neutral"]["spd"] == pytest.approx(0.0)
    assert [e["compliance"]["by_country"][c] for c in "ABC"] == pytest.approx([0.5, 0.8, 0.9])
    assert e["compliance"]["mean"] == pytest.approx((0.5 + 0.8 + 0.9) / 3)
    assert e["compliance_gain"]["mean"] == pytest.approx(((0.5 - 0.75) + (0.8 - 0.25) + (0.9 - 0.75)) / 3)
    assert e["stickiness"] == pytest.approx(0.2)  # only B's cue names another answer; x keeps 0.2 there


def test_bootstrap_intervals_hold_the_point_estimate() -> None:
    rng = np.random.default_rng(0)
    n, k = 12, 4
    order = np.tile([0, 1, 2, 0], (n * (k + 1), 1))
    target = np.tile(np.arange(-1, k), n)
    r = Reading(scores=rng.normal(size=(n * (k + 1), k)), order=order, item=np.repeat(np.arange(n), k + 1),
                target=target, n_items=n)
    out = compute(r, tuple("ABCD"), (("A", "B"), ("D",)), 1.0, 200, 1)
    for path in (("neutral", "KL"), ("compliance", "mean"), ("stickiness",)):
        value, ci = out["expected"], out["ci95"]["expected"]
        for key in path:
            value, ci = value[key], ci[key]
        assert ci[0] <= value <= ci[1]
    assert 0 <= out["expected"]["neutral"]["gini"] <= 1
