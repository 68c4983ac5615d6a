"""The rules judge and one-letter answers (LocQA's "first letter of the alphabet" is `A`): an
article or pronoun spelt like the answer is not a mention of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import shared_dir

from probe.judges import JudgeRequest
from probe.benches.locqa.judging import RulesJudge
from probe.benches.locqa.rules import mentions

# The two responses of issue 28 that the rules judge counted as naming `A`: English text
# answering a German and a Japanese prompt.
GERMAN = "Yes, German has a similar idiomatic expression: „Da liegt der Hund begraben“."
JAPANESE = "日本語にも a similar idiomatic expression があります。Japanese has a similar idiomatic expression."


def _implicit(response: str, language: str) -> JudgeRequest:
    return JudgeRequest("implicit", {"response": response, "language": language, "us_answer": "A",
                                     "gold_answers": ["A"]})


def test_an_english_article_in_a_german_or_japanese_answer_is_not_the_letter() -> None:
    verdicts = RulesJudge().judge([_implicit(GERMAN, "German"), _implicit(JAPANESE, "Japanese")])
    assert [v.output["mentioned_answers"] for v in verdicts] == [[], []]
    assert not mentions(GERMAN, "A", "German") and not mentions(JAPANESE, "A", "Japanese")


@pytest.mark.parametrize(("response", "language"), [
    ('The first letter is "A".', "English"),
    ("A.", "English"),
    ("the answer is A", "English"),
    ("Option A is right.", "English"),
    ("Der erste Buchstabe ist A, wie im Englischen.", "German"),
    ("最初の文字はAです。", "Japanese"),
    ("Aは最初の文字です。", "Japanese"),
    ("Se refiere a la letra «A».", "Spanish"),
    ("La première lettre est **A** : elle a toujours été la première.", "French"),
    ("A primeira letra é A.", "Portuguese"),
])
def test_the_letter_itself_still_counts(response: str, language: str) -> None:
    assert mentions(response, "A", language)


@pytest.mark.parametrize(("response", "answer", "language"), [
    ("A similar idiom exists. It has a long history.", "A", "English"),  # sentence-initial article
    ("Il l'a dit une fois.", "A", "French"),  # French auxiliary "a"
    ("Se lo di a Juan.", "A", "Spanish"),  # Spanish preposition
    ("È la prima lettera? Sì, e anche la più usata.", "E", "Italian"),  # Italian conjunction
    ('The article "a" is not a letter here.', "A", "English"),  # quoted, but not the answer's case
    ("I think it depends.", "I", "English"),  # the English pronoun is always a capital
])
def test_function_words_spelt_like_the_answer_do_not_count(response: str, answer: str, language: str) -> None:
    assert not mentions(response, answer, language)


def test_letters_that_are_no_function_word_match_as_whole_words() -> None:
    assert mentions("plan b works", "B", "English") and not mentions("bob", "B", "English")
    assert mentions("Huruf pertama adalah A.", "a", "Indonesian")  # the file's lower-case answer


def test_explicit_locqa_jobs_tell_the_judge_the_language() -> None:
    from probe.benches.locqa.data import LocQASpec, build_prompts, load_questions
    from probe.benches.locqa.judging import judge_jobs
    from probe.benches.task import PreparedBench

    root = shared_dir()
    if root is None or not (root / "data" / "locqa" / "locqa.json").is_file():
        pytest.skip("the LocQA file needs $PROBE_SHARED_DIR/data/locqa/locqa.json")
    questions = load_questions(Path(root / "data" / "locqa" / "locqa.json"), ("German",), ("Language",))
    prompts = [p.to_prompt() for p in build_prompts(questions, LocQASpec(mode="explicit"))]
    bench = PreparedBench(name="locqa", kind="locqa", letters=(), items=questions, prompts=prompts, source={},
                          cue=None)
    alphabet = [p for p in prompts if "Buchstabe" in p.message]
    assert alphabet, "the German alphabet question is in the data file"
    jobs = judge_jobs(bench, [{"prompt_id": p.prompt_id, "answer": GERMAN} for p in alphabet])
    explicit = [j.request for j in jobs if j.request.task == "explicit"]
    assert explicit and all(r.payload["language"] == "German" for r in explicit)
    assert all(v.output == {"match_locale": False, "mentions_us_answer": False}
               for v in RulesJudge().judge(explicit))
