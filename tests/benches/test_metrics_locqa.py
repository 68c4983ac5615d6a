"""LocQA judging (tasks, validators, rules judge) and metrics against hand-computed values.

The toy set: five templates in English (locale USA only) and Spanish (Mexico, Spain,
Argentina). Gold answers (US answer = the English USA answer):

    T1 emergency number (State)    US 911      | Mexico 911        Spain 112          Argentina 911
    T2 drinking age     (State)    US 21       | Mexico 18         Spain "18 "        Argentina 18
    T3 first president  (History)  US G. Washington | Mexico Guadalupe Victoria  Spain N/A  Argentina B. Rivadavia
    T4 weekend          (Calendar) US Saturday, Sunday | Mexico "Sábado, domingo"  Spain "sábado, domingo "
                                                         Argentina "Sábado y domingo"
    T5 first workday    (Calendar) US Monday   | Lunes (all three)

Semantic matching (Spanish): T1 [Mexico, Argentina]; T2 []; T3 []; T4 all three; T5 ["Lunes"]
(an answer string, which selects every locale holding it). So k (locales ≡ US) = 2, 0, 0, 3, 3
and the answer classes per template are
    T1 {US: Mexico, Argentina} {112: Spain}          m = (2, 1, 2)   (Mexico, Spain, Argentina)
    T2 {18: all three}  ("18 " collides with "18")   m = (3, 3, 3)
    T3 three singletons (N/A is a valid answer)      m = (1, 1, 1)
    T4 {US: all three}                               m = (3, 3, 3)
    T5 {US: all three}                               m = (3, 3, 3)
    N_data = Mexico 12, Spain 11, Argentina 12; Σ = 35.

Spanish responses (implicit judge verdicts):
    T1 ["911"]                          US given, k=2 of 3         → selection
    T2 ["18", "21"], US_COMPARISON      US given, k=0, local given → intrusion, framing
    T3 ["George Washington"]            US given, k=0, no local    → erasure
    T4 ["Sábado y domingo", "Sábado, domingo"] (one class)  k=3=n → valid_overlap
    T5 [], US_COMPARISON                no answer                  → framing only
English responses: T1 ["911"], T2 [], T3 ["George Washington"], T4 ["Saturday, Sunday"],
T5 judge_error (excluded, counted).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from probe.benches.locqa.metrics import (
    Judgement,
    LocQAItem,
    PromptRef,
    compute,
    evaluate,
    locqa_sums,
)
from probe.benches.locqa.judging import RulesJudge
from probe.benches.locqa.rules import (
    frames_us,
    mentions,
    normalize_answer,
    same_answer,
)
from probe.errors import ProbeInputError
from probe.judges import JudgeRequest
from probe.judges.llm import LLMJudge
from probe.judges.registry import judge_task
from probe.metrics.core import AnalysisOptions, bootstrap_weights

T1, T2, T3, T4, T5 = ("What is the national emergency phone number?", "What is the legal drinking age?",
                      "Who was the first president?", "What are the days of the weekend?",
                      "What is the first workday of the week?")
TEMPLATES = [T1, T2, T3, T4, T5]
CATEGORY = {T1: "State", T2: "State", T3: "History", T4: "Calendar", T5: "Calendar"}
US = {T1: "911", T2: "21", T3: "George Washington", T4: "Saturday, Sunday", T5: "Monday"}
SPANISH = {  # Mexico, Spain, Argentina
    T1: ("911", "112", "911"),
    T2: ("18", "18 ", "18"),
    T3: ("Guadalupe Victoria", "N/A", "Bernardino Rivadavia"),
    T4: ("Sábado, domingo", "sábado, domingo ", "Sábado y domingo"),
    T5: ("Lunes", "Lunes", "Lunes"),
}
LOCALES = ("Mexico", "Spain", "Argentina")
SEMANTIC = {T1: ("Mexico", "Argentina"), T2: (), T3: (), T4: LOCALES, T5: ("Lunes",)}
ES_RESPONSES = {  # (mentioned_answers, framing_style)
    T1: (("911",), "NEUTRAL"),
    T2: (("18", "21"), "US_COMPARISON"),
    T3: (("George Washington",), "NEUTRAL"),
    T4: (("Sábado y domingo", "Sábado, domingo"), "NEUTRAL"),
    T5: ((), "US_COMPARISON"),
}
EN_RESPONSES = {T1: ("911",), T2: (), T3: ("George Washington",), T4: ("Saturday, Sunday",), T5: None}


def _questions() -> list[LocQAItem]:
    out = []
    for t in TEMPLATES:
        out.append(LocQAItem(t, CATEGORY[t], "English", (("USA", US[t]),), US[t]))
        out.append(LocQAItem(t, CATEGORY[t], "Spanish", tuple(zip(LOCALES, SPANISH[t])), US[t]))
    return out


def _implicit_run() -> tuple[list[LocQAItem], list[PromptRef], list[Judgement]]:
    prompts = [PromptRef(i, t, "English", "zero_shot") for i, t in enumerate(TEMPLATES)]
    prompts += [PromptRef(5 + i, t, "Spanish", "zero_shot") for i, t in enumerate(TEMPLATES)]
    js = []
    for i, t in enumerate(TEMPLATES):
        js.append(Judgement("semantic_match", t, "English", matches=("USA",), judge="fake"))
        js.append(Judgement("semantic_match", t, "Spanish", matches=SEMANTIC[t], judge="fake"))
        en = EN_RESPONSES[t]
        js.append(Judgement("implicit", t, "English", prompt_id=i, mentioned_answers=en, framing_style="NEUTRAL")
                  if en is not None else
                  Judgement("implicit", t, "English", prompt_id=i, judge_error="invalid after 3 attempts"))
        mentioned, framing = ES_RESPONSES[t]
        js.append(Judgement("implicit", t, "Spanish", prompt_id=5 + i, mentioned_answers=mentioned,
                            framing_style=framing))
    return _questions(), prompts, js


NAN = float("nan")


def _approx(tree: Any, expected: Any) -> None:
    if isinstance(expected, dict):
        assert set(tree) == set(expected), (set(tree), set(expected))
        for k in expected:
            _approx(tree[k], expected[k])
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(tree)
    else:
        assert tree == pytest.approx(expected, abs=1e-12)


# --- metrics: the hand example -----------------------------------------------------------------

def test_hand_example_every_metric() -> None:
    out = compute(*_implicit_run(), AnalysisOptions(n_boot=0))
    expected = {
        # English: Q = T1..T4 (T5's judge failed). Observed 3/4 (T2 gave nothing); every template's
        # single locale is ≡ US, expected (1+1+1+1)/4 = 1 → B_US = 3/4 − 1 = −0.25.
        # Spanish: observed 4/5 (T1–T4 contain the US class); expected (2/3 + 0 + 0 + 1 + 1)/5 = 8/15
        # → B_US = 12/15 − 8/15 = 4/15.
        "B_US": {"English": -0.25, "Spanish": 4 / 15},
        "B_US_macro": 4 / 15,  # non-English languages: Spanish only
        # English: N_model(USA) = 3, N_data = 4 → (3/3)/(4/4) = 1.
        # Spanish: N_model = T1 (1,0,1) + T2 (1,1,1) + T4 (1,1,1) = Mexico 3, Spain 2, Argentina 3; Σ 8.
        # B_R(Mexico) = (3/8)/(12/35) = 35/32; B_R(Spain) = (2/8)/(11/35) = 35/44.
        "B_R": {"English": {"USA": 1.0}, "Spanish": {"Mexico": 35 / 32, "Spain": 35 / 44, "Argentina": 35 / 32}},
        # Spanish: (3/32 + 9/44 + 3/32)/3 = (33/176 + 36/176)/3 = 23/176.
        "B_R_dev": {"English": 0.0, "Spanish": 23 / 176},
        "B_R_dev_macro": 23 / 176,  # English has one locale: left out
        # Five Spanish responses: one of each kind; framing in T2 and T5.
        "taxonomy": {"erasure": 0.2, "intrusion": 0.2, "selection": 0.2, "valid_overlap": 0.2, "framing": 0.4},
        # English T2 and Spanish T5 gave no gold answer: 2 of the 9 valid responses over all
        # languages (the paper's App. F), 1 of the 5 non-English ones
        "no_answer_rate": 2 / 9, "no_answer_rate_non_english": 0.2,
        "multiplicity": 1.0,  # (1 + 2 + 1 + 1 + 0)/5: T4's two strings are one class
        "by_category": {
            # State (T1, T2), Spanish: observed 2/2, expected (2/3 + 0)/2 = 1/3 → 2/3.
            # N_data Mexico 2+3, Spain 1+3, Argentina 2+3 (Σ 14); N_model 2, 1, 2 (Σ 5):
            # B_R = (2/5)/(5/14) = 1.12, (1/5)/(4/14) = 0.7, 1.12 → dev (0.12+0.3+0.12)/3 = 0.18.
            "State": {"B_US_macro": 2 / 3, "B_R_dev_macro": 0.18},
            # History (T3): observed 1, expected 0 → 1; no locale answer given → B_R NaN, dev NaN.
            "History": {"B_US_macro": 1.0, "B_R_dev_macro": NAN},
            # Calendar (T4, T5): observed 1/2, expected (1 + 1)/2 → −0.5; N_model (1,1,1) vs
            # N_data (6,6,6): equal shares → B_R = 1, dev 0.
            "Calendar": {"B_US_macro": -0.5, "B_R_dev_macro": 0.0},
        },
    }
    _approx(out["metrics"], expected)
    assert "explicit" not in out["metrics"]
    assert out["ci95"] == {}
    assert out["n_judge_errors"] == 1 and out["judge_errors_by_task"] == {"implicit": 1}
    tax = out["metrics"]["taxonomy"]  # the four US kinds partition the observed rate (4/5)
    assert tax["erasure"] + tax["intrusion"] + tax["selection"] + tax["valid_overlap"] == pytest.approx(0.8)


def test_bootstrap_weights_are_template_multiplicities() -> None:
    s = locqa_sums(*_implicit_run())
    assert s.templates == sorted(TEMPLATES)  # sorted ids, like every bench's bootstrap units
    m = evaluate(s, np.array([2.0 if t == T1 else 1.0 for t in s.templates]))  # T1 counted twice
    # Spanish observed (2·1 + 1 + 1 + 1 + 0)/6 = 5/6; expected (2·2/3 + 0 + 0 + 1 + 1)/6 = 5/9 → 5/18.
    assert float(m["B_US"]["Spanish"]) == pytest.approx(5 / 18)
    # taxonomy: selection 2/6, intrusion, erasure, overlap 1/6 each
    assert float(m["taxonomy"]["selection"]) == pytest.approx(2 / 6)
    assert float(m["taxonomy"]["erasure"]) == pytest.approx(1 / 6)


def test_semantic_judge_error_drops_the_template_language() -> None:
    q, p, js = _implicit_run()
    js = [Judgement("semantic_match", T3, "Spanish", judge_error="bad JSON")
          if j.task == "semantic_match" and (j.template, j.language) == (T3, "Spanish") else j for j in js]
    out = compute(q, p, js, AnalysisOptions(n_boot=0))
    m = out["metrics"]
    # Spanish Q = T1, T2, T4, T5: observed 3/4, expected (2/3 + 0 + 1 + 1)/4 = 2/3 → 1/12.
    assert m["B_US"]["Spanish"] == pytest.approx(1 / 12)
    assert m["taxonomy"] == pytest.approx({"erasure": 0.0, "intrusion": 0.25, "selection": 0.25,
                                           "valid_overlap": 0.25, "framing": 0.5})
    assert out["n_judge_errors"] == 2 and out["judge_errors_by_task"] == {"implicit": 1, "semantic_match": 1}


def test_language_without_any_locale_answer_has_nan_regional_bias() -> None:
    q, p, js = _implicit_run()
    js = [Judgement("implicit", j.template, "Spanish", prompt_id=j.prompt_id, mentioned_answers=("21",) if
                    j.template == T2 else (), framing_style="NEUTRAL")
          if j.task == "implicit" and j.language == "Spanish" else j for j in js]
    m = compute(q, p, js, AnalysisOptions(n_boot=0))["metrics"]
    # Only "21" (the US answer, valid nowhere in Spanish) is ever given: no locale's answer.
    assert all(math.isnan(v) for v in m["B_R"]["Spanish"].values())
    assert math.isnan(m["B_R_dev"]["Spanish"]) and math.isnan(m["B_R_dev_macro"])
    assert m["taxonomy"]["erasure"] == pytest.approx(0.2) and m["no_answer_rate_non_english"] == pytest.approx(0.8)


def test_explicit_mode() -> None:
    questions = _questions()
    prompts, js = [], []
    verdicts = {  # (template, locale): (match_locale, mentions_us_answer)
        (T1, "Mexico"): (True, True), (T1, "Spain"): (False, True), (T1, "Argentina"): (True, True),
        (T2, "Mexico"): (True, False), (T2, "Spain"): (False, False), (T2, "Argentina"): (False, True),
    }
    for (t, loc), (ok, us) in verdicts.items():
        prompts.append(PromptRef(len(prompts), t, "Spanish", "explicit", loc))
        js.append(Judgement("explicit", t, "Spanish", prompt_id=prompts[-1].prompt_id, match_locale=ok,
                            mentions_us_answer=us))
    prompts.append(PromptRef(len(prompts), T1, "English", "explicit", "USA"))
    js.append(Judgement("explicit", T1, "English", prompt_id=prompts[-1].prompt_id, judge_error="timeout"))
    out = compute(questions, prompts, js, AnalysisOptions(n_boot=50, seed=1))
    # accuracy 3/6; wrong = 3 (T1 Spain, T2 Spain, T2 Argentina), 2 of them name the US answer.
    assert out["metrics"]["explicit"] == pytest.approx({"accuracy": 0.5, "us_hallucination_share": 2 / 3})
    assert math.isnan(out["metrics"]["B_US"]["Spanish"]) and math.isnan(out["metrics"]["taxonomy"]["erasure"])
    assert set(out["ci95"]["explicit"]) == {"accuracy", "us_hallucination_share"}
    assert out["n_judge_errors"] == 1


def _same_shape(ci: Any, m: Any) -> None:
    if isinstance(m, dict):
        assert set(ci) == set(m)
        for k in m:
            _same_shape(ci[k], m[k])
    else:
        assert isinstance(ci, list) and len(ci) == 2


def test_bootstrap_ci_mirrors_metrics_and_is_seeded() -> None:
    run = _implicit_run()
    a = compute(*run, AnalysisOptions(n_boot=200, seed=3))
    b = compute(*run, AnalysisOptions(n_boot=200, seed=3))
    c = compute(*run, AnalysisOptions(n_boot=200, seed=4))
    _same_shape(a["ci95"], a["metrics"])
    assert set(a["metrics"]) == {"B_US", "B_US_macro", "B_R", "B_R_dev", "B_R_dev_macro", "taxonomy",
                                 "no_answer_rate", "no_answer_rate_non_english", "multiplicity", "by_category"}
    np.testing.assert_equal(a["ci95"], b["ci95"])
    assert a["ci95"]["B_US"]["Spanish"] != c["ci95"]["B_US"]["Spanish"]
    lo, hi = a["ci95"]["taxonomy"]["framing"]
    assert 0.0 <= lo <= 0.4 <= hi <= 1.0


def test_vectorised_replicates_equal_one_at_a_time() -> None:
    s = locqa_sums(*_implicit_run())
    w = bootstrap_weights(len(s.templates), 7, seed=0)
    batch = evaluate(s, w)
    for r in range(7):
        one = evaluate(s, w[r])
        for lang in ("English", "Spanish"):
            np.testing.assert_allclose(batch["B_US"][lang][r], one["B_US"][lang], equal_nan=True)
            for loc in one["B_R"][lang]:
                np.testing.assert_allclose(batch["B_R"][lang][loc][r], one["B_R"][lang][loc], equal_nan=True)
        np.testing.assert_allclose(batch["B_R_dev_macro"][r], one["B_R_dev_macro"], equal_nan=True)
        np.testing.assert_allclose(batch["by_category"]["State"]["B_US_macro"][r],
                                   one["by_category"]["State"]["B_US_macro"], equal_nan=True)


# --- metrics: input checks ---------------------------------------------------------------------

def test_missing_judgement_is_an_error() -> None:
    q, p, js = _implicit_run()
    with pytest.raises(ProbeInputError, match="no judgement for prompt_id"):
        compute(q, p, [j for j in js if j.prompt_id != 7], AnalysisOptions(n_boot=0))
    with pytest.raises(ProbeInputError, match="no semantic_match"):
        compute(q, p, [j for j in js if not (j.task == "semantic_match" and j.template == T2
                                              and j.language == "Spanish")], AnalysisOptions(n_boot=0))


def test_unknown_answers_in_judgements_are_errors() -> None:
    q, p, js = _implicit_run()
    bad = [Judgement("implicit", T1, "Spanish", prompt_id=5, mentioned_answers=("999",), framing_style="NEUTRAL")
           if j.prompt_id == 5 else j for j in js]
    with pytest.raises(ProbeInputError, match="'999' is not a gold answer"):
        compute(q, p, bad, AnalysisOptions(n_boot=0))
    bad = [Judgement("semantic_match", T1, "Spanish", matches=("Narnia",))
           if j.task == "semantic_match" and (j.template, j.language) == (T1, "Spanish") else j for j in js]
    with pytest.raises(ProbeInputError, match="Narnia"):
        compute(q, p, bad, AnalysisOptions(n_boot=0))


def test_judgement_from_parquet_record() -> None:
    j = Judgement.from_record({"prompt_id": 3, "task": "implicit", "template": T1, "language": "Spanish",
                               "mentioned_answers": np.array(["911"], dtype=object), "framing_style": "NEUTRAL",
                               "matches": None, "match_locale": float("nan"), "mentions_us_answer": None,
                               "judge_error": None, "judge": "llm"})
    assert j.mentioned_answers == ("911",) and j.match_locale is None


# --- rules judge -------------------------------------------------------------------------------

def test_normalize_answer() -> None:
    assert normalize_answer("  Every\u00a05   Years ") == "every 5 years"
    assert normalize_answer("６ ans ") == normalize_answer("6 ans")


def test_mentions_rules() -> None:
    assert mentions("番号は１１０です。", "110")  # full-width digits → ASCII (NFKC), CJK substring
    assert mentions("The number is 110.", "１１０")
    assert mentions("El primer día es el LUNES.", "lunes")  # case folding
    assert mentions("首都は東京都です", "東京都") and mentions("수도는 서울입니다", "서울")  # no word boundaries
    assert mentions("בירושלים", "ירושלים")  # Hebrew prefix glued to the word
    assert mentions("आयु २१ वर्ष है", "21")  # Devanagari digits
    assert mentions("Die Antwort: 21 Jahre", "21") and mentions("21歳", "21")
    assert not mentions("Es 121.", "21") and not mentions("about 21.5", "21") and not mentions("1,21", "21")
    assert not mentions("Nosotros decimos hola", "no")  # whole words in Latin script
    assert not mentions("N/A", "N/A") and not mentions("the answer is n/a", "N/A")  # N/A never by substring


def test_same_answer_rules() -> None:
    assert same_answer("5", "5.0") and same_answer("Every 5 years", "every 5 years ")
    assert same_answer("N/A", "n/a")  # two locales lacking the thing share that answer
    assert not same_answer("5 years", "5.0 years") and not same_answer("Monday", "Lunes")


def test_framing_words() -> None:
    assert frames_us("En Estados Unidos es 21.", "Spanish") and frames_us("En EE. UU. es 21.", "Spanish")
    assert frames_us("アメリカでは21歳です。", "Japanese") and frames_us("在美国是21岁。", "Chinese")
    assert frames_us("미국에서는 21세입니다.", "Korean") and frames_us("ארה״ב", "Hebrew")
    assert frames_us("Di AS usianya 21.", "Indonesian") and frames_us("aux États-Unis", "French")
    assert frames_us("Like in the USA, it is 21.", "German")  # English names count in every language
    assert not frames_us("Se usa el 112 en América Latina.", "Spanish")  # "usa" verb, continent
    assert not frames_us("Let us see: it is 18.", "English") and not frames_us("Es 18 años.", "Spanish")
    assert not frames_us("Di atas 18 tahun.", "Indonesian")


def test_rules_judge_tasks() -> None:
    reqs = [
        JudgeRequest("semantic_match", {"us_answer": "911", "answers": {"Mexico": "911", "Spain": "112",
                                                                         "Argentina": " 911"}}),
        JudgeRequest("implicit", {"response": "En España es el 112; en Estados Unidos, el 911.", "language": "Spanish",
                                  "us_answer": "911", "gold_answers": ["911", "112", "N/A"]}),
        JudgeRequest("explicit", {"response": "El número es el 112.", "locale": "Spain", "locale_answer": "112",
                                  "us_answer": "911"}),
        JudgeRequest("implicit", {"response": "x"}),
        JudgeRequest("globe_dimensions", {"rationale": "x"}),
    ]
    r = RulesJudge().judge(reqs)
    assert r[0].output == {"matches": ["Mexico", "Argentina"], "dropped": []} and r[0].judge == "rules"
    assert r[1].output == {"mentioned_answers": ["911", "112"], "framing_style": "US_COMPARISON", "dropped": []}
    assert r[2].output == {"match_locale": True, "mentions_us_answer": False}
    assert r[3].output is None and "payload lacks field" in r[3].error
    assert r[4].output is None and "no rules" in r[4].error


# --- task validators ---------------------------------------------------------------------------

SEM = {"question": "q", "us_answer": "Peso", "answers": {"Mexico": "Peso", "China\n(Chinese)": "Yuan",
                                                         "Colombia": "peso ", "Spain": "Euro"}}
IMP = {"question": "q", "response": "r", "language": "French", "us_answer": "21",
       "gold_answers": ["18", "6 ans ", "6 ans"]}


def test_semantic_match_validator() -> None:
    v = judge_task("semantic_match").validate
    # A locale name (case/whitespace-insensitive) pulls in its collisions; an answer string selects
    # every locale holding it; unknown entries are dropped and flagged.
    assert v({"matches": ["mexico"]}, SEM) == {"matches": ["Mexico", "Colombia"], "dropped": []}
    assert v({"matches": ["Yuan", "Narnia"]}, SEM) == {"matches": ["China\n(Chinese)"], "dropped": ["Narnia"]}
    assert v({"matches": ["China (Chinese)"]}, SEM)["matches"] == ["China\n(Chinese)"]
    for bad in ([], {"match": []}, {"matches": "Mexico"}, {"matches": [1]}):
        with pytest.raises(ValueError):
            v(bad, SEM)


def test_implicit_validator() -> None:
    v = judge_task("implicit").validate
    out = v({"mentioned_answers": ["6 ANS", "21", "7 ans"], "framing_style": "neutral", "reasoning": "…"}, IMP)
    # gold order (US first), one raw string per normalised form, unknown flagged
    assert out == {"mentioned_answers": ["21", "6 ans "], "framing_style": "NEUTRAL", "dropped": ["7 ans"]}
    for bad in ({"mentioned_answers": []}, {"mentioned_answers": [], "framing_style": "US"},
                {"mentioned_answers": "18", "framing_style": "NEUTRAL"}, {"framing_style": "NEUTRAL"}, "x"):
        with pytest.raises(ValueError):
            v(bad, IMP)


def test_explicit_validator() -> None:
    v = judge_task("explicit").validate
    assert v({"match_locale": True, "mentions_us_answer": False, "reasoning": "r"}, {}) == \
        {"match_locale": True, "mentions_us_answer": False}
    for bad in ({"match_locale": "true", "mentions_us_answer": False}, {"match_locale": True}, [True, False]):
        with pytest.raises(ValueError):
            v(bad, {})


def test_prompts_show_the_payload() -> None:
    assert "China\n(Chinese)" in judge_task("semantic_match").prompt(SEM) and '"Peso"' in judge_task("semantic_match").prompt(SEM)
    text = judge_task("implicit").prompt(IMP)
    assert '- "21"' in text and '- "6 ans "' in text and text.count("6 ans") == 1  # collisions listed once
    text = judge_task("explicit").prompt({"response": "r", "locale": "Spain", "locale_answer": "112", "us_answer": "911"})
    assert "Spain" in text and '"112"' in text and '"911"' in text


def test_llm_judge_retries_then_validates() -> None:
    class FakeChat:
        def __init__(self) -> None:
            self.replies = iter([['{"mentioned_answers": ["18"], "framing_style": "MAYBE"}'],
                                 ['Sure: {"mentioned_answers": ["18", "17"], "framing_style": "NEUTRAL"}']])

        def chat(self, prompts: list[str]) -> list[str]:
            return next(self.replies)

    [r] = LLMJudge(FakeChat(), retries=1).judge([JudgeRequest("implicit", IMP)])
    assert r.error is None and r.output == {"mentioned_answers": ["18"], "framing_style": "NEUTRAL", "dropped": ["17"]}


def test_per_category_regional_macro_leaves_english_out() -> None:
    """With a second English locale, English has a regional bias: the overall |B_R − 1| macro
    counts it (as the paper's main table), the per-category macro does not (its Table 5)."""
    q, p, js = _implicit_run()
    q = [LocQAItem(x.template, x.category, x.language, (("USA", US[x.template]), ("UK", "a British answer")),
                   x.us_answer) if x.language == "English" else x for x in q]
    m = compute(q, p, js, AnalysisOptions(n_boot=0))["metrics"]
    # English answers name only the US answer: B_R(USA) = (3/3)/(4/8) = 2, B_R(UK) = 0 → dev 1
    assert m["B_R_dev"]["English"] == pytest.approx(1.0)
    assert m["B_R_dev_macro"] == pytest.approx((1.0 + 23 / 176) / 2)
    assert m["by_category"]["State"]["B_R_dev_macro"] == pytest.approx(0.18)  # Spanish only, as before
    assert m["by_category"]["Calendar"]["B_R_dev_macro"] == pytest.approx(0.0)
