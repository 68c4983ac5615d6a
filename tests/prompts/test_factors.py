"""Prompt factors (`probe.prompts.factors`): the built-in levels, levels from a file, expansion
into variants, and the errors a design meets before anything runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from probe.errors import ProbeInputError
from probe.prompts.factors import (
    BUILTIN_FACTORS,
    PROTOCOL,
    FactorError,
    Level,
    check_level,
    expand,
    load_levels,
    with_levels,
)

ALL = tuple(BUILTIN_FACTORS)


def test_the_builtin_factors_are_the_documented_ones_with_the_protocol_first() -> None:
    assert ALL == ("labels", "layout", "cue", "instruction", "system")
    names = {f.name: f.level_names for f in BUILTIN_FACTORS.values()}
    assert names == {"labels": ("protocol", "lower", "digits"), "layout": ("protocol", "paren"),
                     "cue": ("protocol", "answer", "bare"), "instruction": ("protocol", "pick", "select", "which"),
                     "system": ("none", "neutral")}
    for factor in BUILTIN_FACTORS.values():
        assert factor.levels[0].is_protocol and not any(level.is_protocol for level in factor.levels[1:])
        for level in factor.levels:
            check_level(factor, level, f"built-in {factor.name} level {level.name!r}")
    labels = BUILTIN_FACTORS["labels"]
    assert labels.level("lower").labels_for(4) == ("a", "b", "c", "d")
    assert labels.level("digits").labels_for(10) == tuple(str(i) for i in range(1, 11))
    assert labels.level(PROTOCOL).labels_for(4) is None
    texts = [level.text for level in BUILTIN_FACTORS["instruction"].levels[1:]]
    assert len(set(texts)) == len(texts) >= 3 and all(t and t.count("{labels}") == 1 for t in texts)


def test_a_factorial_expands_with_the_protocol_first_and_the_last_factor_fastest() -> None:
    variants = expand(["labels", "cue"], BUILTIN_FACTORS, admitted=ALL)
    assert len(variants) == 9 and [v.index for v in variants] == list(range(9))
    assert variants[0].is_protocol and variants[0].name == "protocol"
    assert [v.level_names() for v in variants[:2]] == [{"labels": "protocol", "cue": "protocol"},
                                                       {"labels": "protocol", "cue": "answer"}]
    assert variants[5].name == "labels=lower,cue=bare" and variants[5].level("cue").text == ""
    assert variants[5].level("instruction").is_protocol  # a factor the design does not vary
    assert len({v.name for v in variants}) == 9
    assert expand([], BUILTIN_FACTORS, admitted=ALL)[0].is_protocol  # no factors: the protocol alone
    assert len(expand([], BUILTIN_FACTORS, admitted=ALL)) == 1
    assert len(expand(["labels", "layout", "cue", "instruction", "system"], BUILTIN_FACTORS, admitted=ALL)) == 144


def test_explicit_variants_keep_their_order_after_the_protocol() -> None:
    variants = expand([{"labels": "digits"}, {"cue": "bare", "labels": "lower"}, {}], BUILTIN_FACTORS, admitted=ALL)
    assert [v.name for v in variants] == ["protocol", "labels=digits", "labels=lower,cue=bare"]
    assert [f for f, _ in variants[1].levels] == ["labels", "cue"]  # every used factor, in catalogue order


def test_the_cap_counts_the_variants() -> None:
    with pytest.raises(FactorError, match=re.escape("the factorial of labels (3) × cue (3) × instruction (4) has 36 "
                                                    "variants, more than the cap of 20")):
        expand(["labels", "cue", "instruction"], BUILTIN_FACTORS, admitted=ALL, max_variants=20)
    with pytest.raises(FactorError, match=re.escape("3 variants (the protocol's included), more than the cap of 2")):
        expand([{"labels": "digits"}, {"labels": "lower"}], BUILTIN_FACTORS, admitted=ALL, max_variants=2)
    assert len(expand(["labels", "cue"], BUILTIN_FACTORS, admitted=ALL, max_variants=9)) == 9


@pytest.mark.parametrize(("design", "admitted", "message"), [
    (["lables"], ALL, "factors: unknown factor 'lables' (did you mean 'labels'?): expected one of labels, layout"),
    (["layout"], ("labels", "cue"), "factors: factor 'layout' is not admitted by this bench's protocol: it admits "
                                    "labels, cue"),
    (["cue", "cue"], ALL, "factors: 'cue' is named twice"),
    ([{"cue": "anwser"}], ALL, "factors[0]: factor 'cue' has no level 'anwser' (did you mean 'answer'?): expected one of "
                               "protocol, answer, bare"),
    ([{"labels": "lower"}, {"system": "neutral"}], ("labels",), "factors[1]: factor 'system' is not admitted"),
    ([{"labels": "lower"}, {"labels": "lower"}], ALL, "factors[1]: the same levels as factors[0]"),
    (["labels", {"cue": "bare"}], ALL, "factors: expected factor names (a factorial) or variants"),
    ("labels", ALL, "factors: expected a list of factor names, got the string 'labels' (write [labels])"),
])
def test_a_bad_design_is_refused_before_anything_runs(design: list[object], admitted: tuple[str, ...],
                                                      message: str) -> None:
    with pytest.raises(FactorError, match=re.escape(message)) as info:
        expand(design, BUILTIN_FACTORS, admitted=admitted)  # type: ignore[arg-type]
    assert isinstance(info.value, ProbeInputError) and isinstance(info.value, ValueError)


def test_levels_come_from_a_yaml_or_json_file(tmp_path: Path) -> None:
    path = tmp_path / "levels.yaml"
    path.write_text("instruction:\n  fr: 'Choisissez une seule option ({labels}), sans explication.'\n"
                    "labels:\n  roman: [I, II, III, IV]\nlayout:\n  dash: '- {label}: {text}'\n"
                    "cue:\n  json: '{\"choice\":\"'\nsystem:\n  terse: Answer briefly.\n", encoding="utf-8")
    factors = load_levels(path)
    assert factors["instruction"].level("fr").source == str(path)
    assert factors["labels"].level("roman").labels == ("I", "II", "III", "IV")
    assert factors["cue"].level("json").text == '{"choice":"'  # a cue is plain text: braces are literal
    variants = expand(["labels", "instruction"], factors, admitted=ALL)
    assert len(variants) == 4 * 5 and variants[-1].name == "labels=roman,instruction=fr"
    with pytest.raises(FactorError, match="labels level 'roman' .* has 4 labels, the prompt shows 10 options"):
        factors["labels"].level("roman").labels_for(10)
    as_json = tmp_path / "levels.json"
    as_json.write_text(json.dumps({"labels": {"greek": ["α", "β", "γ"]}}), encoding="utf-8")
    assert load_levels(as_json)["labels"].level_names[-1] == "greek"
    assert BUILTIN_FACTORS["labels"].level_names == ("protocol", "lower", "digits")  # the built-ins stay as they are


@pytest.mark.parametrize(("content", "message"), [
    ("instruction:\n  fr: Choisissez une seule option.\n",
     "instruction level 'fr': the text lacks the placeholder {labels} that instruction levels need"),
    ("layout:\n  dash: '- {text}'\n", "layout level 'dash': the text lacks the placeholder {label}"),
    ("instruction:\n  x: 'One of {labels} as {\"answer\": \"\"}'\n", "instruction level 'x': unknown placeholder"),
    ("instruction:\n  x: 'One of {labels'\n", "instruction level 'x': expected '}' before end of string"),
    ("tone:\n  warm: Be kind.\n", "unknown factor 'tone': levels can be added to labels, layout"),
    ("cue:\n  answer: 'A:'\n", "cue level 'answer': factor 'cue' already has a level of that name"),
    ("labels:\n  dup: [a, a, b]\n", "labels level 'dup': expected ≥ 2 distinct labels without spaces"),
    ("labels:\n  one: x\n", "labels level 'one': expected a list of label strings, got 'x'"),
    ("system:\n  n: [1, 2]\n", "system level 'n': expected a string, got list"),
    ("system:\n  'has space': Hi.\n", "level name 'has space': expected letters, digits"),
    ("- labels\n", "expected a mapping of factor → {level: value}, got list"),
    ("labels: [\n", "not valid YAML"),
])
def test_a_bad_levels_file_is_refused_naming_the_level(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "levels.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FactorError, match=re.escape(message)) as info:
        load_levels(path)
    assert str(info.value).startswith(str(path))


def test_a_levels_file_must_exist_and_be_yaml_or_json(tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match="cannot read the factor levels file"):
        load_levels(tmp_path / "absent.yaml")
    with pytest.raises(FactorError, match=r"expected a \.yaml, \.yml or \.json file"):
        load_levels(tmp_path / "levels.txt")
    with pytest.raises(FactorError, match="not valid JSON"):
        (tmp_path / "bad.json").write_text("{", encoding="utf-8")
        load_levels(tmp_path / "bad.json")


def test_levels_can_be_added_in_memory_too() -> None:
    factors = with_levels(BUILTIN_FACTORS, {"cue": {"colon": "Choice:"}}, "analysis config")
    assert factors["cue"].level("colon") == Level("colon", text="Choice:", source="analysis config")


def test_a_factorial_design_is_the_balanced_factorial_the_analysis_reads() -> None:
    from probe.metrics.format_robustness import Factorial

    variants = expand(["labels", "cue", "instruction"], BUILTIN_FACTORS, admitted=ALL)
    factorial = Factorial.of({v.name: v.level_names() for v in variants})
    assert factorial.variants == tuple(v.name for v in variants)  # the same order: the protocol's first
    assert factorial.levels == tuple(BUILTIN_FACTORS[f].level_names for f in ("labels", "cue", "instruction"))
