"""BLEnD's short-answer judging and metrics, on hand-computed examples."""

from __future__ import annotations

import math

import pytest

from probe.benches.blend.judging import SHORT_ANSWER, BlendRulesJudge, gives, normalize
from probe.benches.blend.metrics import Verdict, compute
from probe.judges import make_judge
from probe.judges.base import JudgeRequest
from probe.metrics.core import AnalysisOptions


def test_normalisation() -> None:
    assert normalize("  Jollof-Rice!! ") == "jollof rice"
    assert normalize("ＦＵＬＬ width") == "full width"  # NFKC
    assert normalize("«Paella», claro.") == "paella claro"
    assert normalize("STRASSE") == normalize("straße")  # case folding, not lower()


@pytest.mark.parametrize(("response", "answer", "expected"), [
    ("Jollof rice, usually.", "jollof rice", True),
    ("rice", "jollof rice", False),               # part of an answer is not the answer
    ("Rice pudding", "rice", True),               # the answer inside a longer one counts (as the paper's "included")
    ("Ricepudding", "rice", False),               # Latin script: whole words only
    ("饺子和汤圆", "饺子", True),                   # no spaces between Chinese words: substring
    ("김치찌개입니다", "김치찌개", True),            # Korean particles attach: substring
    ("Football", "", False),
])
def test_gives(response: str, answer: str, expected: bool) -> None:
    assert gives(response, answer) is expected


def test_rules_judge_hand_computed() -> None:
    payload = {"question": "What is a common snack for preschool kids in US?", "language": "en",
               "response": "Fruit or a PB&J sandwich.",
               "gold_answers": ["fruit", "sandwiches", "PB&J", "peanut butter and jelly", "Fruit"]}
    [result] = make_judge({"name": "blend_rules"}).judge([JudgeRequest(SHORT_ANSWER.name, payload)])
    # "fruit" and "Fruit" are one answer after normalisation; "PB&J" → "pb j", found as words;
    # "sandwiches" is not "sandwich" (no lemmatisation)
    assert result.error is None and result.judge == "blend_rules"
    assert result.output == {"correct": True, "matched_answers": ["fruit", "PB&J"], "dropped": []}
    [miss] = BlendRulesJudge().judge([JudgeRequest(SHORT_ANSWER.name, {**payload, "response": "Cookies."})])
    assert miss.output == {"correct": False, "matched_answers": [], "dropped": []}
    [other] = BlendRulesJudge().judge([JudgeRequest("implicit", payload)])
    assert other.output is None and "no rules for task 'implicit'" in str(other.error)


def test_validator_maps_drops_and_checks_consistency() -> None:
    payload = {"response": "x", "gold_answers": ["Paella", "tortilla de patatas"]}
    out = SHORT_ANSWER.validate({"correct": True, "matched_answers": ["paella ", "gazpacho"]}, payload)
    assert out == {"correct": True, "matched_answers": ["Paella"], "dropped": ["gazpacho"]}
    with pytest.raises(ValueError, match="'correct' is true but matched_answers holds 0"):
        SHORT_ANSWER.validate({"correct": True, "matched_answers": []}, payload)
    with pytest.raises(ValueError, match="'correct': expected true or false"):
        SHORT_ANSWER.validate({"correct": "yes", "matched_answers": []}, payload)
    assert "- \"tortilla de patatas\"" in SHORT_ANSWER.prompt({**payload, "question": "q"})


def _v(q: str, country: str, language: str, correct: bool | None, kept: bool = True, topic: str = "Food",
       template: str = "inst-4") -> Verdict:
    return Verdict(q, country, language, template, topic, kept, correct)


def test_metrics_hand_computed() -> None:
    verdicts = [
        # Spain: local 2/2, English 1/2 (q2 is excluded by the multiple-choice rule)
        _v("q1", "Spain", "local", True), _v("q2", "Spain", "local", True, kept=False),
        _v("q1", "Spain", "en", False), _v("q2", "Spain", "en", True, kept=False),
        # Assam (low resource): local 0/2, English 1/2; q2's verdict failed in English
        _v("q1", "Assam", "local", False, topic="Sport"), _v("q2", "Assam", "local", False, kept=False),
        _v("q1", "Assam", "en", True, topic="Sport"), _v("q2", "Assam", "en", None, kept=False),
        # US (high resource, local = English): 1/2
        _v("q1", "US", "local", True), _v("q2", "US", "local", False, kept=False),
    ]
    out = compute(verdicts, ["Assam", "Spain", "US"], (("US",), ("Assam",)), AnalysisOptions(n_boot=200, seed=1))
    m = out["metrics"]["all"]
    assert m["by_country"]["Spain"] == {"local": 1.0, "en": 0.5, "gap": 0.5}
    assert m["by_country"]["Assam"] == {"local": 0.0, "en": 1.0, "gap": -1.0}  # the failed verdict is left out
    assert m["by_country"]["US"]["local"] == 0.5 and math.isnan(m["by_country"]["US"]["en"])
    assert m["score"]["local"] == pytest.approx(0.5)          # (0 + 1 + 0.5) / 3
    assert m["score"]["en"] == pytest.approx(0.75)            # (1 + 0.5) / 2, US has no English prompts
    assert m["gap"] == pytest.approx(-0.25)                   # (−1 + 0.5) / 2
    assert m["resource_gap"]["local"] == pytest.approx(0.5)   # US 0.5 − Assam 0
    assert math.isnan(m["resource_gap"]["en"])                # no high-resource country asked in English
    assert m["by_topic"]["Sport"] == {"local": 0.0, "en": 1.0}
    assert m["by_topic"]["Food"]["local"] == pytest.approx(3 / 5)  # Spain 2 of 2, Assam 0 of 1, US 1 of 2
    kept = out["metrics"]["kept"]
    assert kept["by_country"]["Spain"] == {"local": 1.0, "en": 0.0, "gap": 1.0}
    assert kept["by_country"]["US"]["local"] == 1.0
    lo, hi = out["ci95"]["all"]["score"]["local"]
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0
    assert compute(verdicts, ["Spain"], ((), ()), AnalysisOptions(n_boot=0))["ci95"] == {}


def test_llm_judge_reads_the_task_and_is_validated() -> None:
    """An LLM judge sees the question, the response and the gold list; a reply whose `correct`
    contradicts its matches is re-asked with the validator's error, then accepted when consistent."""

    class Scripted:
        def __init__(self, replies: list[str]) -> None:
            self.replies, self.seen = replies, []

        def chat(self, prompts: list[str]) -> list[str]:
            self.seen += prompts
            return [self.replies.pop(0) for _ in prompts]

    chat = Scripted(['{"correct": true, "matched_answers": []}',
                     '{"correct": true, "matched_answers": ["Paella valenciana", "pizza"]}'])
    payload = {"question": "What is a typical Sunday lunch in Spain?", "response": "Una paella.", "language": "en",
               "gold_answers": ["paella valenciana", "cocido"]}
    [result] = make_judge({"name": "llm", "retries": 1}, chat=chat).judge([JudgeRequest(SHORT_ANSWER.name, payload)])
    assert result.error is None and result.judge == "llm"
    assert result.output == {"correct": True, "matched_answers": ["paella valenciana"], "dropped": ["pizza"]}
    assert len(chat.seen) == 2 and '- "cocido"' in chat.seen[0] and "Una paella." in chat.seen[0]
    assert "'correct' is true but matched_answers holds 0" in chat.seen[1]
