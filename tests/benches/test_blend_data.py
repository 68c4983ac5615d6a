"""BLEnD loading, validation, the source's exclusion rule and the short-answer prompts.

Real-data tests read the published files from $PROBE_SHARED_DIR/data/blend (never copied into
the project) and count the exclusions independently from the raw JSON. Malformed variants are
tiny synthetic files in the real schema, written into tmp_path.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import blend_dir

from probe.benches.blend import data as blend
from probe.benches.blend.checksums import DATA_SHA256, FILE_SHA256, combined_sha256
from probe.benches.blend.prompts import build
from probe.errors import ProbeInputError
from probe.files import sha256_file


_real_root = blend_dir


@pytest.fixture(scope="module")
def real() -> blend.BlendData:
    root = _real_root()
    return blend.load(blend.resolve_files(blend.BlendSpec(path=str(root)), Path("unused")))


# --- the real files -----------------------------------------------------------------------------

def test_the_whole_real_dataset_loads(real: blend.BlendData) -> None:
    assert len(real.questions) == 16 * 500
    assert [c for c in dict.fromkeys(q.country for q in real.questions)] == list(blend.COUNTRIES)
    ids = {c: [q.qid for q in real.questions if q.country == c] for c in blend.COUNTRIES}
    assert all(len(v) == 500 and set(v) == set(ids["US"]) for v in ids.values())
    assert len(real.templates) == 16 * 2
    assert {q.topic for q in real.questions} == {"Food", "Holidays/Celebration/Leisure", "Sport", "Education",
                                                 "Work life", "Family"}


def test_exclusions_follow_the_source_rule(real: blend.BlendData) -> None:
    root = _real_root()
    expected = 0
    for country in blend.COUNTRIES:  # counted from the raw JSON, independently of the loader
        for v in json.loads((root / "annotations" / f"{country}_data.json").read_text()).values():
            expected += v["idks"].get("not-applicable", 0) > 0 or sum(v["idks"].values()) > 2
    assert real.n_excluded == expected == 1547
    us = {q.qid: q for q in real.questions if q.country == "US"}
    assert us["Al-en-01"].kept and us["Al-en-01"].gold("en")[:2] == ("fruit", "sandwiches")


def test_real_checksums_and_a_changed_copy(tmp_path: Path) -> None:
    root = _real_root()
    assert {n: sha256_file(root / n) for n in FILE_SHA256} == FILE_SHA256
    assert combined_sha256(FILE_SHA256) == DATA_SHA256 == blend.BlendSpec().sha256
    copy = tmp_path / "blend"
    shutil.copytree(root, copy)
    path = copy / "questions" / "Spain_questions.csv"
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(ProbeInputError, match="combined sha256 .* does not match .*changed: questions/Spain_questions.csv"):
        blend.resolve_files(blend.BlendSpec(path=str(copy)), tmp_path)
    assert blend.resolve_files(blend.BlendSpec(path=str(copy), sha256=None), tmp_path)[
        "questions/Spain_questions.csv"] == path


def test_download_from_a_mirror_is_checked_per_file(tmp_path: Path) -> None:
    root = _real_root()
    files = blend.resolve_files(blend.BlendSpec(url=root.as_uri()), tmp_path / "cache")
    assert len(files) == 48 and all(sha256_file(p) == FILE_SHA256[n] for n, p in files.items())
    assert all(tmp_path / "cache" in p.parents for p in files.values())
    mirror = tmp_path / "mirror"
    shutil.copytree(root, mirror)
    (mirror / "prompts" / "UK_prompts.csv").write_text("id,English,Translation\n", encoding="utf-8")
    with pytest.raises(ProbeInputError, match="UK_prompts.csv: sha256 .* does not match"):
        blend.resolve_files(blend.BlendSpec(url=mirror.as_uri()), tmp_path / "cache2")


def test_short_answer_prompts_of_the_real_data(real: blend.BlendData) -> None:
    built = build(real, blend.PAPER_TEMPLATES)
    # 14 countries asked in two languages, US and UK once; China's New-en-04 has a blank local question
    assert len(built.prompts) == 2 * (14 * 500 * 2 + 2 * 500 - 1)
    assert built.skipped_local == ("New-en-04|China",)
    first = built.prompts[0]
    assert first.value("template") == "inst-4" and first.value("language") == "local"
    assert first.message.endswith("السؤال: ماذا يأكل الأطفال كوجبة خفيفة قبل المدرسة في الجزائر؟\nالإجابة:")
    english = built.prompts[1]
    assert english.message == ("Read the following question and provide a single answer without any explanations."
                               "\n\nQuestion: What is a common snack for preschool kids in Algeria?\nAnswer:")
    # Azerbaijan lists inst-4 twice: the first row is the one used
    az = real.templates[("Azerbaijan", "inst-4")].local
    assert az.endswith("izahatsız tək bir cavab verin.\n\nSual: {q}\nCavab:")


# --- malformed variants (tiny files in the real schema) --------------------------------------

def _write(root: Path, country: str, ann: dict, questions: list[list[str]], prompts: list[list[str]]) -> None:
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "questions").mkdir(exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "annotations" / f"{country}_data.json").write_text(json.dumps(ann), encoding="utf-8")
    for name, rows in ((f"questions/{country}_questions.csv", questions), (f"prompts/{country}_prompts.csv", prompts)):
        with (root / name).open("w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(rows)


def _ann(country: str) -> dict:
    return {"q1": {"question": f"Food in {country}?", "en_question": f"Food in {country}?",
                   "annotations": [{"answers": ["rice"], "en_answers": ["rice"], "count": 3},
                                   {"answers": ["bread"], "en_answers": [], "count": 1}],
                   "idks": {"idk": 1, "no-answer": 0, "not-applicable": 0}},
            "q2": {"question": f"Sport in {country}?", "en_question": f"Sport in {country}?",
                   "annotations": [], "idks": {"idk": 2, "no-answer": 1, "not-applicable": 0}}}


def _questions(country: str) -> list[list[str]]:
    return [["", "ID", "Topic", "Source", "Question", "Translation"],
            ["0", "q1", "Food", "x", f"Food in {country}?", f"Food in {country}?"],
            ["1", "q2", "Sport", "x", f"Sport in {country}?", f"Sport in {country}?"]]


PROMPTS = [["id", "English", "Translation"], ["inst-4", "Q: {q}\nA:", "Q: {q}\nA:"], ["pers-3", "P {q}", "P {q}"]]


def small(tmp_path: Path, mutate: Callable[[dict], None] | None = None) -> dict[str, Path]:
    """Every country's three files, written into tmp_path; `mutate` edits the mutable parts
    (`{"ann": {country: json}, "questions": {country: rows}, "prompts": {country: rows}}`) first."""
    parts = {"ann": {c: _ann(c) for c in blend.COUNTRIES}, "questions": {c: _questions(c) for c in blend.COUNTRIES},
             "prompts": {c: [list(r) for r in PROMPTS] for c in blend.COUNTRIES}}
    if mutate:
        mutate(parts)
    root = tmp_path / "blend"
    for c in blend.COUNTRIES:
        _write(root, c, parts["ann"][c], parts["questions"][c], parts["prompts"][c])
    return blend.resolve_files(blend.BlendSpec(path=str(root), sha256=None), tmp_path)


def test_the_small_files_load(tmp_path: Path) -> None:
    data = blend.load(small(tmp_path), countries=["Spain", "US"])
    assert [(q.country, q.qid, q.kept) for q in data.questions] == [
        ("Spain", "q1", True), ("Spain", "q2", False), ("US", "q1", True), ("US", "q2", False)]
    assert data.questions[0].gold("en") == ("rice",) and data.questions[0].gold("local") == ("rice", "bread")
    assert blend.load(small(tmp_path / "b"), limit=1).n_excluded == 0


def test_the_rule_on_its_boundaries() -> None:
    assert blend.keeps({"idk": 2, "no-answer": 0, "not-applicable": 0})
    assert blend.keeps({"idk": 1, "no-answer": 0, "not-applicable": 0, "free text": 1})
    assert not blend.keeps({"idk": 2, "no-answer": 0, "not-applicable": 0, "free text": 1})  # 3 in total
    assert not blend.keeps({"idk": 0, "no-answer": 0, "not-applicable": 1})


def _set(path: tuple, value: object) -> Callable[[dict], None]:
    def mutate(parts: dict) -> None:
        target = parts
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


MALFORMED = {
    "idks not counts": (_set(("ann", "Spain", "q1", "idks", "idk"), "one"),
                        r"Spain_data.json: question 'q1', field 'idks': expected an object of vote counts"),
    "annotations not a list": (_set(("ann", "Spain", "q2", "annotations"), {"rice": 1}),
                               r"Spain_data.json: question 'q2', field 'annotations': expected a list, got dict"),
    "count zero": (_set(("ann", "Greece", "q1", "annotations", 0, "count"), 0),
                   r"Greece_data.json: question 'q1', field 'annotations'\[0\].count: expected a vote count ≥ 1, got 0"),
    "answers not strings": (_set(("ann", "Iran", "q1", "annotations", 1, "answers"), [3]),
                            r"Iran_data.json: question 'q1', field 'annotations'\[1\].answers: expected a list of "
                            r"strings, got \[3\]"),
    "annotation missing": (lambda p: p["ann"]["Mexico"].pop("q2"),
                           r"Mexico_data.json: question 'q2' \(listed in Mexico_questions.csv\) has no annotations"),
    "annotation not listed": (lambda p: p["questions"]["UK"].pop(),
                              r"UK_data.json: question\(s\) \['q2'\] are not listed in .*UK_questions.csv"),
    "duplicate id": (_set(("questions", "China", 2, 1), "q1"),
                     r"China_questions.csv: row 3, question 'q1', field 'ID': expected a unique non-empty id"),
    "blank translation": (_set(("questions", "Assam", 1, 5), " "),
                          r"Assam_questions.csv: row 2, question 'q1', field 'Translation': expected a non-empty"),
    "missing column": (lambda p: [r.pop(2) for r in p["questions"]["Algeria"]],
                       r"Algeria_questions.csv: missing column\(s\) \['Topic'\]"),
    "ids differ": (lambda p: [p["questions"]["US"][2].__setitem__(1, "q9"),
                              p["ann"]["US"].__setitem__("q9", p["ann"]["US"].pop("q2"))],
                   r"US_data.json: question ids differ from Algeria's \(e.g. \['q2', 'q9'\]\)"),
    "template without {q}": (_set(("prompts", "Spain", 1, 2), "Q: \nA:"),
                             r"Spain_prompts.csv: row 2, template 'inst-4', field 'Translation': expected a template "
                             r"with \{q\}"),
    "template missing": (lambda p: p["prompts"]["Ethiopia"].pop(),
                         r"Ethiopia_prompts.csv: no template \['pers-3'\] \(bench.templates\)"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_stop_naming_file_question_and_field(tmp_path: Path, case: str) -> None:
    mutate, message = MALFORMED[case]
    with pytest.raises(ProbeInputError, match=message):
        blend.load(small(tmp_path, mutate))


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    files = small(tmp_path)
    files["annotations/Spain_data.json"].write_text('{"q1": {', encoding="utf-8")
    with pytest.raises(ProbeInputError, match=r"Spain_data.json: invalid or truncated JSON"):
        blend.load(files)


def test_deeply_nested_json_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """Before: the parser's RecursionError surfaced as a traceback."""
    files = small(tmp_path)
    files["annotations/Spain_data.json"].write_text('{"q1": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    with pytest.raises(ProbeInputError, match=r"Spain_data.json: JSON nested too deeply to be BLEnD data"):
        blend.load(files)


def test_bad_paths_and_countries(tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match="bench.path: .* is not a directory"):
        blend.resolve_files(blend.BlendSpec(path=str(tmp_path / "nope")), tmp_path)
    files = small(tmp_path)
    files["prompts/West_Java_prompts.csv"].unlink()
    with pytest.raises(ProbeInputError, match=r"bench.path: 1 BLEnD files missing, e.g. .*West_Java_prompts.csv"):
        blend.resolve_files(blend.BlendSpec(path=str(tmp_path / "blend"), sha256=None), tmp_path)
    with pytest.raises(ProbeInputError, match=r"bench.countries: \['Narnia'\] are not BLEnD countries"):
        blend.load(files, countries=["Narnia"])
