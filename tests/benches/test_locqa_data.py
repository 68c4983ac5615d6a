"""LocQA loading, validation, prompt building and rendering.

Real-file tests read locqa.json from $PROBE_SHARED_DIR (never copied into the project) and
compute expected counts independently from the raw JSON where they depend on filters.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import shared_dir, write_json_file

from probe.benches.locqa import data as locqa
from probe.errors import ProbeInputError
from probe.prompts.parse import normalize_answer
from probe.prompts.render import RenderSettings, render_prompts

LANGUAGES_12 = ["English", "Spanish", "French", "German", "Hebrew", "Hindi", "Indonesian", "Italian",
                "Japanese", "Korean", "Portuguese", "Chinese"]


def _real_path() -> Path:
    root = shared_dir()
    path = root / "data" / "locqa" / "locqa.json" if root else None
    if path is None or not path.is_file():
        pytest.skip("LocQA data not available ($PROBE_SHARED_DIR/data/locqa/locqa.json)")
    return path


@pytest.fixture(scope="module")
def real_path() -> Path:
    return _real_path()


@pytest.fixture(scope="module")
def real_questions(real_path: Path) -> list[locqa.LocQAQuestion]:
    return locqa.load_questions(real_path)


@pytest.fixture(scope="module")
def tokenizer():
    from probe.models.tiny import TinySpec, build_tokenizer

    return build_tokenizer(TinySpec())


def small_file(tmp_path: Path, mutate=None) -> Path:
    """A 2-template LocQA file (English with USA/UK, Chinese with a newline key)."""
    data = {
        "What side of the road do people drive on?": {"category": "State and Country", "languages": {
            "English": {"translated_question": "What side of the road do people drive on?",
                        "answers": {"USA": "Right", "UK": "Left"}},
            "Chinese": {"translated_question": "人们开车靠哪边行驶？",
                        "answers": {"China\n(Chinese)": "右边", "Singapore\n(Chinese)": "左边"}}}},
        "How often are elections held?": {"category": "Law", "languages": {
            "English": {"translated_question": "How often are elections held?",
                        "answers": {"USA": "Every 4 years", "UK": "N/A"}},
            "Chinese": {"translated_question": "选举多久举行一次？",
                        "answers": {"China\n(Chinese)": "每5年", "Singapore\n(Chinese)": "每5年"}}}},
    }
    if mutate:
        mutate(data)
    return write_json_file(tmp_path / "locqa.json", data)


# --- the real file ---------------------------------------------------------------------------

def test_real_file_checksum(real_path: Path, tmp_path: Path) -> None:
    assert locqa.resolve_source(locqa.LocQASpec(path=str(real_path)), tmp_path) == real_path


def test_real_counts(real_path: Path, real_questions: list[locqa.LocQAQuestion]) -> None:
    qs = real_questions
    assert len({q.template for q in qs}) == 44
    assert [lang for lang in dict.fromkeys(q.language for q in qs)] == LANGUAGES_12
    assert len(qs) == 44 * 12
    answers = [a for q in qs for a in q.answers]
    assert len(answers) == 2156
    assert len({(q.language, a.locale) for q in qs for a in q.answers}) == 49
    assert sum(a.answer == "N/A" for a in answers) == 58
    assert sum(len(v) for v in locqa.language_locales(qs).values()) == 49


def test_real_newline_locales(real_questions: list[locqa.LocQAQuestion]) -> None:
    chinese = [a for q in real_questions if q.language == "Chinese" for a in q.answers]
    assert {a.locale for a in chinese} == {"China (Chinese)", "Singapore (Chinese)"}
    assert {a.locale_raw for a in chinese} == {"China\n(Chinese)", "Singapore\n(Chinese)"}
    assert all("\n" not in a.locale for q in real_questions for a in q.answers)


def test_real_us_answers(real_path: Path, real_questions: list[locqa.LocQAQuestion]) -> None:
    raw = json.loads(real_path.read_text(encoding="utf-8"))
    for q in real_questions:
        assert q.us_answer == raw[q.template]["languages"]["English"]["answers"]["USA"]
        assert q.us_answer.strip()
        # Answers are kept raw (trailing spaces and all), for the judgement tables.
        assert {a.locale_raw: a.answer for a in q.answers} == raw[q.template]["languages"][q.language]["answers"]


def test_real_filters(real_path: Path) -> None:
    raw = json.loads(real_path.read_text(encoding="utf-8"))
    law = [t for t, v in raw.items() if v["category"] == "Law"]
    qs = locqa.load_questions(real_path, languages=("Japanese",), categories=("Law",))
    assert [q.template for q in qs] == law and {q.language for q in qs} == {"Japanese"}
    assert sum(len(q.answers) for q in qs) == sum(len(raw[t]["languages"]["Japanese"]["answers"]) for t in law)
    # The US answer comes from English even when English is filtered out.
    assert [q.us_answer for q in qs] == [raw[t]["languages"]["English"]["answers"]["USA"] for t in law]
    law_all = locqa.load_questions(real_path, categories=("Law",))
    assert len(law_all) == sum(len(raw[t]["languages"]) for t in law)


def test_real_prompt_counts(real_questions: list[locqa.LocQAQuestion]) -> None:
    zero = locqa.build_prompts(real_questions, locqa.LocQASpec())
    assert len(zero) == 528 and [p.prompt_id for p in zero] == list(range(528))
    assert all(p.locale is None and p.message == p.question for p in zero)
    explicit = locqa.build_prompts(real_questions, locqa.LocQASpec(mode="explicit"))
    triples = {(q.template, q.language, a.locale) for q in real_questions for a in q.answers}
    assert len(explicit) == len(triples) == 2156
    assert [(p.template, p.language, p.locale) for p in explicit] == [
        (q.template, q.language, a.locale) for q in real_questions for a in q.answers]
    three = locqa.build_prompts(real_questions, locqa.LocQASpec(mode="three_shot"))
    assert len(three) == 528 and all(len(p.exemplars) == 3 for p in three)


# --- answers, exemplars ----------------------------------------------------------------------

def test_normalize_answer() -> None:
    n = normalize_answer
    assert n("Every 5 years") == n("every 5 years")
    assert n("6 ans ") == n("6 ans") == "6 ans"
    assert n("１２") == "12"
    assert n("Tous les 5\u202fans") == n("Tous les 5 ans")
    assert n("  Heure de l'Est\nUTC−05:00 ") == "heure de l'est utc−05:00"
    assert n("Right") != n("Left")


def test_exemplars_complete() -> None:
    assert list(locqa.EXEMPLARS) == LANGUAGES_12
    for lang, ex in locqa.EXEMPLARS.items():
        assert set(ex) == set(locqa.EXEMPLAR_KEYS), lang
        assert all(isinstance(v, str) and v.strip() for v in ex.values()), lang
        assert ex["arith_a"] == "4", lang
    english = locqa.EXEMPLARS["English"]  # the paper's wording of the three exemplars
    assert (english["arith_q"], english["ocean_q"], english["planet_q"]) == (
        "What is 2+2?", "What is the largest ocean on Earth?", "What planet is closest to the Sun?")


# --- validation ------------------------------------------------------------------------------

def test_small_file_loads(tmp_path: Path) -> None:
    qs = locqa.load_questions(small_file(tmp_path))
    assert [(q.template[:4], q.language) for q in qs] == [
        ("What", "English"), ("What", "Chinese"), ("How ", "English"), ("How ", "Chinese")]
    assert qs[1].us_answer == "Right" and qs[1].answers[0].locale == "China (Chinese)"
    assert qs[2].answers[1].answer == "N/A"


@pytest.mark.parametrize(("mutate", "needles"), [
    (lambda d: d["How often are elections held?"]["languages"]["Chinese"].pop("translated_question"),
     ["How often are elections held?", "'Chinese'", "translated_question"]),
    (lambda d: d["How often are elections held?"]["languages"]["English"]["answers"].update(UK="  "),
     ["How often are elections held?", "'English'", "'UK'", "answers"]),
    (lambda d: d["How often are elections held?"]["languages"]["English"]["answers"].pop("USA"),
     ["How often are elections held?", "'English'", "'USA'"]),
    (lambda d: d["How often are elections held?"].pop("category"), ["How often are elections held?", "category"]),
    (lambda d: d["How often are elections held?"]["languages"]["Chinese"].pop("answers"), ["'Chinese'", "answers"]),
    (lambda d: d["How often are elections held?"]["languages"]["Chinese"]["answers"].update(
        {"China (Chinese)": "x"}), ["'Chinese'", "same locale"]),
])
def test_validation_errors(tmp_path: Path, mutate, needles: list[str]) -> None:
    path = small_file(tmp_path, mutate)
    with pytest.raises(ProbeInputError) as e:
        locqa.load_questions(path)
    assert str(path) in str(e.value)
    for needle in needles:
        assert needle in str(e.value)


def test_bad_filters_and_files(tmp_path: Path) -> None:
    path = small_file(tmp_path)
    with pytest.raises(ProbeInputError, match="bench.languages.*Klingon"):
        locqa.load_questions(path, languages=("Klingon",))
    with pytest.raises(ProbeInputError, match="bench.categories.*Food"):
        locqa.load_questions(path, categories=("Food",))
    with pytest.raises(ProbeInputError, match="non-empty JSON object"):
        locqa.load_questions(write_json_file(tmp_path / "list.json", []))
    (tmp_path / "cut.json").write_text('{"a": {', encoding="utf-8")
    with pytest.raises(ProbeInputError, match="truncated"):
        locqa.load_questions(tmp_path / "cut.json")
    (tmp_path / "dup.json").write_text('{"a": {"category": "x", "category": "y"}}', encoding="utf-8")
    with pytest.raises(ProbeInputError, match="duplicate key 'category'"):
        locqa.load_questions(tmp_path / "dup.json")


def test_resolve_source(tmp_path: Path) -> None:
    path = small_file(tmp_path)
    with pytest.raises(ProbeInputError, match="does not match bench.sha256"):
        locqa.resolve_source(locqa.LocQASpec(path=str(path)), tmp_path)
    assert locqa.resolve_source(locqa.LocQASpec(path=str(path), sha256=None), tmp_path) == path
    with pytest.raises(ProbeInputError, match="does not exist"):
        locqa.resolve_source(locqa.LocQASpec(path=str(tmp_path / "missing.json")), tmp_path)
    # A download is fetched once into the cache (file:// stands in for the network).
    spec = locqa.LocQASpec(url=path.as_uri(), sha256=None)
    cached = locqa.resolve_source(spec, tmp_path / "cache")
    key = hashlib.sha256(path.as_uri().encode()).hexdigest()[:16]  # the cache is keyed by URL
    assert cached == tmp_path / "cache" / "locqa" / key / "locqa.json" and cached.read_bytes() == path.read_bytes()
    with pytest.raises(ProbeInputError, match="download"):
        locqa.resolve_source(locqa.LocQASpec(url=path.as_uri()), tmp_path / "cache2")
    assert not list((tmp_path / "cache2").rglob("locqa.json"))


def test_prompt_ids_and_explicit_text(tmp_path: Path) -> None:
    qs = locqa.load_questions(small_file(tmp_path), languages=("Chinese",))
    ps = locqa.build_prompts(qs, locqa.LocQASpec(mode="explicit"))
    assert [(p.prompt_id, p.template[:4], p.locale) for p in ps] == [
        (0, "What", "China (Chinese)"), (1, "What", "Singapore (Chinese)"),
        (2, "How ", "China (Chinese)"), (3, "How ", "Singapore (Chinese)")]
    assert ps[1].message == "Locale: Singapore (Chinese). 人们开车靠哪边行驶？"
    g = ps[1].to_prompt()
    assert (g.item_id, g.value("mode"), g.value("locale"), g.prefix_key, g.category, g.message) == (
        "What side of the road do people drive on? | Chinese", "explicit", "Singapore (Chinese)",
        "What side of the road do people drive on?|Chinese", "State and Country", ps[1].message)


# --- rendering -------------------------------------------------------------------------------

def render(prompts, tokenizer, settings: RenderSettings, max_positions: int | None = None):  # type: ignore[no-untyped-def]
    """LocQA prompts rendered for generation, as the pipeline does (no answer cue)."""
    return render_prompts(tokenizer, [p.to_prompt() for p in prompts], None, replace(settings, cue=None), "test",
                          max_positions=max_positions)[0]


def test_render_instruct(tmp_path: Path, tokenizer) -> None:
    qs = locqa.load_questions(small_file(tmp_path), languages=("Chinese",))
    three = locqa.build_prompts(qs, locqa.LocQASpec(mode="three_shot"))
    settings = RenderSettings(kind="instruct")
    g = three[0].to_prompt()  # exemplars become chat turns before the question
    assert len(g.shots) == 3 and g.shots[0] == (locqa.EXEMPLARS["Chinese"]["arith_q"], locqa.EXEMPLARS["Chinese"]["arith_a"])
    assert g.message == qs[0].question
    r = render(three, tokenizer, settings)
    assert r[0].text.endswith(f"{qs[0].question}<|im_end|>\n<|im_start|>assistant\n")
    assert r[0].text.count("<|im_start|>") == 8  # 7 turns + the generation prompt
    assert r[0].token_ids[0] == tokenizer.bos_token_id and list(r[0].token_ids).count(tokenizer.bos_token_id) == 1
    assert r[0].prompt.value("mode") == "three_shot" and r[0].prompt.value("locale") is None
    sys = RenderSettings(kind="instruct", system_prompt="Be brief.")
    zero = locqa.build_prompts(qs, locqa.LocQASpec())
    text = render(zero[:1], tokenizer, sys)[0].text
    assert text.startswith("<|bos|><|im_start|>system\nBe brief.<|im_end|>") and text.count("<|im_start|>") == 3


def test_render_base(tmp_path: Path, tokenizer) -> None:
    qs = locqa.load_questions(small_file(tmp_path))
    settings = RenderSettings(kind="base")
    zero = render(locqa.build_prompts(qs, locqa.LocQASpec()), tokenizer, settings)
    assert zero[0].text == "Question: What side of the road do people drive on?\nAnswer:"
    assert zero[1].text == "问题: 人们开车靠哪边行驶？\n答案:"
    assert all(r.token_ids[0] == tokenizer.bos_token_id for r in zero)
    three = render(locqa.build_prompts(qs[:1], locqa.LocQASpec(mode="three_shot")), tokenizer, settings)[0]
    blocks = three.text.split("\n\n")
    assert len(blocks) == 4 and blocks[1] == "Question: What is the largest ocean on Earth?\nAnswer: The Pacific Ocean"
    assert three.text.endswith("\nAnswer:")
    with pytest.raises(ProbeInputError, match="longer than the model allows"):
        render(locqa.build_prompts(qs[:1], locqa.LocQASpec(mode="three_shot")), tokenizer, settings,
                     max_positions=10)


def test_render_real_three_shot_fits(real_questions: list[locqa.LocQAQuestion], tokenizer) -> None:
    ps = locqa.build_prompts(real_questions, locqa.LocQASpec(mode="three_shot"))
    rendered = render(ps, tokenizer, RenderSettings(kind="instruct"))
    assert len(rendered) == 528 and all(r.text.endswith("<|im_start|>assistant\n") for r in rendered)
