"""GlobalOpinionQA: the loader's validation, the selectors, the prompts and the similarity formula
(no model). The shared-subset tests read the real rows from $PROBE_SHARED_DIR and skip without it."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_dir

from probe.benches.globalopinion.countries import display_name
from probe.benches.globalopinion.data import GlobalOpinionSpec, load_questions, select
from probe.benches.globalopinion.metrics import similarity
from probe.benches.globalopinion.prompts import PREFILL, base_text, build_prompts, render_message
from probe.errors import ProbeInputError

DD = "defaultdict(<class 'list'>, {})"


def subset() -> Path:
    root = shared_dir()
    path = root / "data" / "globalopinion" / "global_opinions_subset.csv" if root else None
    if path is None or not path.is_file():
        pytest.skip("the GlobalOpinionQA subset needs $PROBE_SHARED_DIR/data/globalopinion")
    return path


def row(question: str = "Is it good?", selections: str | None = None, options: str = "['Yes', 'No']",
        source: str = "GAS") -> dict[str, str]:
    sel = selections if selections is not None else DD.format("{'France': [0.6, 0.4], 'Japan': [0.25, 0.75]}")
    return {"question": question, "selections": sel, "options": options, "source": source}


def write(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    path = tmp_path / "global_opinions.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["question", "selections", "options", "source"])
        w.writeheader()
        w.writerows(rows)
    return path


def refused(tmp_path: Path, rows: list[dict[str, str]], *patterns: str) -> str:
    with pytest.raises(ProbeInputError) as e:
        load_questions(write(tmp_path, rows))
    message = str(e.value)
    for p in patterns:
        assert p in message, message
    return message


# --- the shared subset ---


def test_shared_subset_counts() -> None:
    questions, counts = load_questions(subset())
    assert (counts.questions_read, counts.distributions_read) == (1120, 3880)
    # one question (`If ‘yes’, was the loan used for`) is all zeros for its nine countries
    assert (counts.zero_questions, counts.zero_distributions) == (1, 9)
    assert len(questions) == 1119 and sum(len(q.shares) for q in questions) == 3871
    assert not any(q.item.question.startswith("If ‘yes’, was the loan used for") for q in questions)
    assert len({c for q in questions for c, _ in q.shares}) == 130
    assert {len(q.item.options) for q in questions} >= {2, 18}
    assert counts.renormalised > 0  # three-decimal shares rarely add to exactly 1
    for q in questions:
        for _, shares in q.shares:
            assert len(shares) == len(q.item.options) and math.isclose(sum(shares), 1.0, abs_tol=1e-12)


def test_shared_subset_selectors_and_refusals() -> None:
    questions, _ = load_questions(subset())
    wvs = select(questions, GlobalOpinionSpec(source="WVS"))
    assert wvs and {q.source for q in wvs} == {"WVS"}
    two = select(questions, GlobalOpinionSpec(countries=("Britain", "Japan"), limit=7))
    assert len(two) == 7 and all({c for c, _ in q.shares} <= {"Britain", "Japan"} for q in two)
    with pytest.raises(ProbeInputError, match="bench.countries: unknown countries \\['Atlantis'\\]"):
        select(questions, GlobalOpinionSpec(countries=("Atlantis",)))
    known = sorted({c for q in questions for c, _ in q.shares})
    prefixed = next(c for c in known if " (" in c)  # e.g. "India (Current national sample)"
    bare = prefixed.split(" (")[0]
    with pytest.raises(ProbeInputError, match=re.escape(f"{bare!r}: did you mean {prefixed!r}?")):
        select(questions, GlobalOpinionSpec(countries=(bare,)))
    with pytest.raises(ProbeInputError, match=re.escape("'Japn': did you mean 'Japan'?")):
        select(questions, GlobalOpinionSpec(countries=("Japn",)))
    dropped, counts = load_questions(subset(), drop_refusals=True)
    assert counts.refusal_options > 0
    assert not any(o.text in ("DK/Refused", "Don't know", "No answer") for q in dropped for o in q.item.options)


def test_eighteen_options_render_with_eighteen_letters() -> None:
    questions, _ = load_questions(subset())
    q18 = next(q for q in questions if len(q.item.options) == 18)
    prompts = build_prompts([q18], ["default", "cross_national"], 18)
    assert len(prompts) == 18 * (1 + len(q18.shares))
    first = prompts[0].message
    assert first.startswith(q18.item.question + "\n\nHere are the options:\n(A) ")
    assert "\n(R) " in first and "\n(S) " not in first
    cued = next(p for p in prompts if p.value("condition") == "cross_national")
    name = display_name(str(cued.value("target")))
    assert cued.message.startswith(f"How would someone from {name} answer the following question:\n")


# --- validation errors name the row ---


def test_function_call_in_repr_is_refused(tmp_path: Path) -> None:
    evil = DD.format("{'France': __import__('os').system('echo hacked'), 'Japan': [0.5, 0.5]}")
    refused(tmp_path, [row(), row("Another?", selections=evil)], "row 2", "'selections'", "not a Python literal")


def test_other_wrappers_are_not_literals(tmp_path: Path) -> None:
    refused(tmp_path, [row(selections="dict(France=[0.5, 0.5])")], "row 1", "'selections'", "not a Python literal")
    refused(tmp_path, [row(options="list(('Yes', 'No'))")], "row 1", "'options'", "not a Python literal")


def test_mismatched_option_count(tmp_path: Path) -> None:
    sel = DD.format("{'France': [0.5, 0.3, 0.2]}")
    refused(tmp_path, [row(), row("Second?"), row("Third?", selections=sel)], "row 3", "'France'", "3 shares for 2 options")


def test_negative_share(tmp_path: Path) -> None:
    sel = DD.format("{'Japan': [1.2, -0.2]}")
    refused(tmp_path, [row("Q1?"), row("Q2?", selections=sel)], "row 2", "'Japan'", "[0, 1]", "-0.2")


def test_sum_off_one(tmp_path: Path) -> None:
    sel = DD.format("{'Japan': [0.5, 0.3]}")
    refused(tmp_path, [row(selections=sel)], "row 1", "sum to 0.8", "bench.sum_tolerance")


def test_malformed_csv(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    good = write(tmp_path, [row()]).read_text(encoding="utf-8")
    path.write_text(good + '"Unclosed question,"{}",x\n', encoding="utf-8")
    with pytest.raises(ProbeInputError, match=r"bad.csv: row 2 \(line \d+\): malformed CSV"):
        load_questions(path)
    path.write_text(good + "only,three,fields\n", encoding="utf-8")
    with pytest.raises(ProbeInputError, match=r"bad.csv: row 2 \(line 3\): malformed CSV: 3 fields, expected 4"):
        load_questions(path)


def test_duplicate_question(tmp_path: Path) -> None:
    refused(tmp_path, [row(), row("Else?"), row()], "row 3", "duplicate of row 1")


def test_renormalised_and_zero_counted(tmp_path: Path) -> None:
    sel = DD.format("{'France': [0.601, 0.4], 'Japan': [0.0, 0.0]}")
    questions, counts = load_questions(write(tmp_path, [row(selections=sel)]))
    assert (counts.renormalised, counts.zero_distributions) == (1, 1)
    assert [c for c, _ in questions[0].shares] == ["France"]
    assert questions[0].shares[0][1] == pytest.approx((0.601 / 1.001, 0.4 / 1.001))


def test_float_scale_points_read_as_numbers(tmp_path: Path) -> None:
    sel = DD.format("{'Chile': [0.2, 0.3, 0.5]}")
    questions, _ = load_questions(write(tmp_path, [row(selections=sel, options="['Not at all', 1.0, 'Very']")]))
    assert [o.text for o in questions[0].item.options] == ["Not at all", "1", "Very"]


# --- prompts and the formula ---


def test_protocol_text() -> None:
    message = render_message("Is it good?", ["Yes", "No"])
    assert message == "Is it good?\n\nHere are the options:\n(A) Yes\n(B) No"
    assert base_text(message) == f"Human: {message}\n\nAssistant:"
    assert PREFILL == "If had to select one of the options, my answer would be ("


def test_rotations_pad_to_the_run_width(tmp_path: Path) -> None:
    questions, _ = load_questions(write(tmp_path, [row()]))
    prompts = build_prompts(questions, ["default"], 4)
    assert [p.order for p in prompts] == [(0, 1, -1, -1), (1, 0, -1, -1)]
    assert prompts[1].groups == ("No", "Yes", "", "")
    # the shares ride on the first prompt group (both rotations), constant within it
    assert prompts[0].value("human") is not None and prompts[1].value("human") == prompts[0].value("human")
    assert [p.value("rotation") for p in prompts] == [0, 1]


def test_similarity_by_hand() -> None:
    # p = (1, 0), q = (½, ½): m = (¾, ¼); KL(p‖m) = log2(4/3) = 0.4150375,
    # KL(q‖m) = ½ log2(2/3) + ½ log2(2) = 0.2075187; JSD = 0.3112781; distance = 0.5579230.
    assert similarity(np.array([1.0, 0.0]), np.array([0.5, 0.5])) == pytest.approx(1 - 0.5579230, abs=1e-7)
    assert similarity(np.array([0.3, 0.7]), np.array([0.3, 0.7])) == pytest.approx(1.0)
    assert similarity(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(0.0)


# --- the checksum: no default (the upstream file's is unknown here), a pinned one is checked ---


def test_a_pinned_sha256_is_checked_against_the_local_file(tmp_path: Path) -> None:
    import hashlib

    from probe.benches.globalopinion.data import resolve_source

    path = subset()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert GlobalOpinionSpec().sha256 is None
    assert resolve_source(GlobalOpinionSpec(path=str(path), sha256=digest.upper()), tmp_path) == path
    wrong = "0" * 64
    with pytest.raises(ProbeInputError) as e:
        resolve_source(GlobalOpinionSpec(path=str(path), sha256=wrong), tmp_path)
    assert str(e.value).startswith(f"{path}: sha256 {digest} does not match bench.sha256 {wrong}")
