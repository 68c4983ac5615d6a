"""BLEnD's published files: loading, validation and the source's exclusion rule (docs/benchmarks/blend.md).

Three files per country, under `bench.path` (a directory holding `annotations/`, `questions/`
and `prompts/`) or downloaded once each from the source repository at a fixed commit:
- `annotations/{Country}_data.json`: question id → local and English question, the annotators'
  answers (`answers`, `en_answers`, `count` votes) and the `idks` votes;
- `questions/{Country}_questions.csv`: `ID`, `Topic`, `Question` (local), `Translation` (English);
- `prompts/{Country}_prompts.csv`: template `id`, `English`, `Translation` (local), `{q}` marking
  the question. One published file (Azerbaijan) lists `inst-4` and `pers-3` twice, with two
  wordings of the translation; the first row of an id is used, as a lookup of the first match does.

Every country must hold the same question ids. A (question, country) pair is *kept* when the
source's multiple-choice construction keeps it: no `not-applicable` vote and at most two votes in
`idks` in total (every key counted, free-text ones included). On the published files this drops
1,547 of the 8,000 pairs; scores are reported on all pairs and on the kept ones.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from probe.benches.blend.checksums import DATA_SHA256, FILE_SHA256, SOURCE_URL, combined_sha256
from probe.benches.spec_header import DownloadedBench
from probe.benches.sources import MAX_DOWNLOAD_BYTES, fetch
from probe.config import Ge
from probe.errors import ProbeInputError
from probe.files import sha256_file, utf8_error

COUNTRIES: tuple[str, ...] = (
    "Algeria", "Assam", "Azerbaijan", "China", "Ethiopia", "Greece", "Indonesia", "Iran", "Mexico", "North_Korea",
    "Northern_Nigeria", "South_Korea", "Spain", "UK", "US", "West_Java",
)
"""The 16 countries (regions) in the file names' spelling."""
ENGLISH_COUNTRIES: tuple[str, ...] = ("UK", "US")
"""Countries whose local language is English: their questions are asked once (as `local`)."""
HIGH_RESOURCE: tuple[str, ...] = ("UK", "US", "South_Korea", "China")
LOW_RESOURCE: tuple[str, ...] = ("Ethiopia", "Northern_Nigeria", "Assam")
PAPER_TEMPLATES: tuple[str, ...] = ("inst-4", "pers-3")
"""The templates of the paper's final short-answer runs."""
Mode = Literal["short_answer", "whose_answer"]


@dataclass(frozen=True)
class BlendSpec(DownloadedBench):
    """The `bench:` block of BLEnD: everyday-culture questions about 16 countries, in local languages and English."""

    name: str = "blend"
    kind: str = "blend"
    path: str | None = None
    """A local copy of the data directory (annotations/, questions/, prompts/); null downloads from `url`."""
    url: str = SOURCE_URL
    """The published `data/` directory, its 48 files downloaded once each into $PROBE_CACHE/data."""
    sha256: str | None = DATA_SHA256
    """Combined checksum of the 48 files (path and sha256 of each); null accepts an edited copy."""
    mode: Mode = "short_answer"
    """short_answer: the paper's protocol (greedy answers judged against the annotated answers); whose_answer: which country's answer the model's scores favour (backend.mode=text)."""
    templates: tuple[str, ...] = PAPER_TEMPLATES
    """Prompt template ids of the prompts files (the paper's final runs: inst-4 and pers-3)."""
    countries: tuple[str, ...] = ()
    """Countries to ask about (file-name spelling, e.g. `North_Korea`); empty keeps all 16."""
    limit: Annotated[int, Ge(1)] | None = None
    """Ask only the first N question ids (file order; smoke tests; whose_answer: the first N qualifying); null = all."""
    high_resource: tuple[str, ...] = HIGH_RESOURCE
    """The high-resource group of the high − low gap (DiSCo's grouping)."""
    low_resource: tuple[str, ...] = LOW_RESOURCE
    """The low-resource group of the high − low gap."""
    text_form: Literal["cloze"] = "cloze"
    """whose_answer's answer-text formulation: the question alone, each candidate answer its continuation."""


@dataclass(frozen=True)
class Annotation:
    """One annotated answer: its wordings in the local language and in English, and its votes."""

    answers: tuple[str, ...]
    en_answers: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class BlendQuestion:
    """One question id asked about one country."""

    qid: str
    country: str
    topic: str
    question: str
    """In the country's local language (`Question` of the questions file); empty where the file
    leaves it blank (China `New-en-04` in the published files), and then not asked locally."""
    en_question: str
    """In English (`Translation` of the questions file)."""
    annotations: tuple[Annotation, ...]
    idks: tuple[tuple[str, int], ...]
    kept: bool
    """Kept by the source's multiple-choice rule (no `not-applicable` vote, ≤ 2 `idks` votes)."""

    def gold(self, language: str) -> tuple[str, ...]:
        """Every annotated answer in `language` (`local` or `en`), in vote order."""
        return tuple(a for ann in self.annotations for a in (ann.answers if language == "local" else ann.en_answers))


@dataclass(frozen=True)
class Template:
    """One prompt template of one country: `{q}` stands for the question."""

    template_id: str
    local: str
    english: str


@dataclass(frozen=True)
class BlendData:
    """The loaded benchmark: questions of each country in file order, and the templates."""

    questions: tuple[BlendQuestion, ...]
    templates: Mapping[tuple[str, str], Template]
    """(country, template id) → template."""

    @property
    def n_excluded(self) -> int:
        """Pairs the source's multiple-choice rule drops."""
        return sum(not q.kept for q in self.questions)


def keeps(idks: Mapping[str, int]) -> bool:
    """The source's multiple-choice rule: no `not-applicable` vote and at most two `idks` votes."""
    return idks.get("not-applicable", 0) == 0 and sum(idks.values()) <= 2


def file_names(countries: Sequence[str]) -> list[str]:
    """The data files of `countries`, as paths under `data/`."""
    return [f"{kind}/{c}_{suffix}" for c in countries
            for kind, suffix in (("annotations", "data.json"), ("questions", "questions.csv"), ("prompts", "prompts.csv"))]


def resolve_files(spec: BlendSpec, cache_dir: Path) -> dict[str, Path]:
    """Each published file (its path under `data/` → where it is here): under `spec.path`, or
    downloaded once each from `spec.url`. With `spec.sha256` set, every file is checked: against
    its published digest when `spec.sha256` is the published set's, and the combined digest of
    all 48 against `spec.sha256` in any case."""
    names = file_names(COUNTRIES)
    published = spec.sha256 == DATA_SHA256
    if spec.path:
        root = Path(spec.path).expanduser()
        if not root.is_dir():
            raise ProbeInputError(f"bench.path: {root} is not a directory (expected annotations/, questions/, prompts/)")
        files = {n: root / n for n in names}
        missing = [str(p) for p in files.values() if not p.is_file()]
        if missing:
            raise ProbeInputError(f"bench.path: {len(missing)} BLEnD files missing, e.g. {missing[0]}")
    else:
        files = {n: fetch(None, f"{spec.url.rstrip('/')}/{n}", FILE_SHA256[n] if published else None,
                          cache_dir / "blend", _check_file, spec.max_download_bytes) for n in names}
    if spec.sha256:
        digests = {n: sha256_file(p) for n, p in files.items()}
        if combined_sha256(digests) != spec.sha256.lower():
            changed = [n for n in names if published and digests[n] != FILE_SHA256[n]]
            which = f" (changed: {', '.join(changed[:3])}{'…' if len(changed) > 3 else ''})" if changed else ""
            where = f"bench.path {spec.path}" if spec.path else f"bench.url {spec.url}"
            raise ProbeInputError(f"{where}: the BLEnD files' combined sha256 {combined_sha256(digests)} does not "
                                  f"match bench.sha256 {spec.sha256}{which}; set bench.sha256=null to accept an "
                                  "edited copy")
    return files


def read_files(files: Mapping[str, Path], countries: Sequence[str] = ()) -> tuple[Path, ...]:
    """The files `load` reads for `countries` (all when empty), in the order it reads them."""
    return tuple(files[n] for n in file_names([c for c in COUNTRIES if not countries or c in countries]))


def load(files: Mapping[str, Path], countries: Sequence[str] = (), templates: Sequence[str] = PAPER_TEMPLATES,
         limit: int | None = None) -> BlendData:
    """Read and validate the files of `countries` (all when empty): the first `limit` question
    ids, and the given template ids of each country. Errors name the file, the question id (or
    row) and the field."""
    unknown = sorted(set(countries) - set(COUNTRIES))
    if unknown:
        raise ProbeInputError(f"bench.countries: {unknown} are not BLEnD countries; expected some of {list(COUNTRIES)}")
    chosen = [c for c in COUNTRIES if not countries or c in countries]
    questions: list[BlendQuestion] = []
    ids: list[str] | None = None
    for country in chosen:
        mine = _country(files, country)
        order = [q.qid for q in mine]
        if ids is None:
            ids = order
        elif set(order) != set(ids):
            odd = sorted(set(order) ^ set(ids))[:3]
            raise ProbeInputError(f"{files[f'annotations/{country}_data.json']}: question ids differ from "
                                  f"{chosen[0]}'s (e.g. {odd}); every country must hold the same ids")
        questions += mine
    keep = set((ids or [])[:limit])
    table = {(c, t): tpl for c in chosen for t, tpl in _templates(files[f"prompts/{c}_prompts.csv"], templates).items()}
    return BlendData(tuple(q for q in questions if q.qid in keep), table)


def _check_file(path: Path) -> None:
    """Parse one downloaded file as its kind (its name says which) before it is cached: a page of
    HTML or a truncated copy is refused, naming the URL, and not kept."""
    if path.name.endswith("_data.json"):
        data = _read_json(path)
        if not isinstance(data, dict) or not data:
            raise ProbeInputError(f"{path.name}: expected a non-empty JSON object of question ids, got "
                                  f"{type(data).__name__}")
    elif path.name.endswith("_questions.csv"):
        _read_csv(path, ("ID", "Topic", "Question", "Translation"))
    elif path.name.endswith("_prompts.csv"):
        _read_csv(path, ("id", "English", "Translation"))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise ProbeInputError(f"{path}: key {e.key!r} appears twice in one JSON object (a question id or a field "
                              "given twice: which one counts is undefined); keep one") from None
    except json.JSONDecodeError as e:
        raise ProbeInputError(f"{path}: invalid or truncated JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except RecursionError:  # `[[[[…` thousands deep: the parser's recursion limit, not a traceback
        raise ProbeInputError(f"{path}: JSON nested too deeply to be BLEnD data (arrays or objects thousands of "
                              "levels deep)") from None


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (`json` keeps the last one silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _read_csv(path: Path, required: Sequence[str]) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames or []
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except csv.Error as e:
        raise ProbeInputError(f"{path}: malformed CSV ({e})") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise ProbeInputError(f"{path}: missing column(s) {missing}; expected {list(required)}, got {header}")
    for row_no, row in enumerate(rows, start=2):  # csv fills a short row with None, puts a long row's extra under None
        if None in row or any(row[c] is None for c in required):
            cells = len(header) + len(row.get(None) or []) - sum(v is None for v in row.values())
            raise ProbeInputError(f"{path}: row {row_no} has {cells} cell(s) where the header has {len(header)} "
                                  f"columns ({header}); every row must have one cell per column")
    return rows


def _country(files: Mapping[str, Path], country: str) -> list[BlendQuestion]:
    """The questions of one country, in the questions file's order, with their annotations."""
    ann_path, q_path = files[f"annotations/{country}_data.json"], files[f"questions/{country}_questions.csv"]
    data = _read_json(ann_path)
    if not isinstance(data, dict) or not data:
        raise ProbeInputError(f"{ann_path}: expected a non-empty JSON object of question ids, got {type(data).__name__}")
    out, seen = [], set()
    for row_no, row in enumerate(_read_csv(q_path, ("ID", "Topic", "Question", "Translation")), start=2):
        qid = (row["ID"] or "").strip()
        where = f"{q_path}: row {row_no}, question {qid!r}"
        if not qid or qid in seen:
            raise ProbeInputError(f"{where}, field 'ID': expected a unique non-empty id, got {qid!r}")
        seen.add(qid)
        for field in ("Topic", "Translation"):  # a blank `Question` is allowed: see `BlendQuestion.question`
            if not (row[field] or "").strip():
                raise ProbeInputError(f"{where}, field {field!r}: expected a non-empty string, got {row[field]!r}")
        if qid not in data:
            raise ProbeInputError(f"{ann_path}: question {qid!r} (listed in {q_path.name}) has no annotations")
        annotations, idks = _annotations(f"{ann_path}: question {qid!r}", data[qid])
        out.append(BlendQuestion(qid=qid, country=country, topic=row["Topic"].strip(), question=row["Question"].strip(),
                                 en_question=row["Translation"].strip(), annotations=annotations,
                                 idks=tuple(idks.items()), kept=keeps(idks)))
    extra = sorted(set(data) - seen)
    if extra:
        raise ProbeInputError(f"{ann_path}: question(s) {extra[:3]} are not listed in {q_path}")
    return out


def _annotations(where: str, obj: Any) -> tuple[tuple[Annotation, ...], dict[str, int]]:
    if not isinstance(obj, dict):
        raise ProbeInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    idks = obj.get("idks")
    if not isinstance(idks, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                             for v in idks.values()):
        raise ProbeInputError(f"{where}, field 'idks': expected an object of vote counts (integers ≥ 0), got {idks!r}")
    items = obj.get("annotations")
    if not isinstance(items, list):
        raise ProbeInputError(f"{where}, field 'annotations': expected a list, got {type(items).__name__}")
    out = []
    for i, a in enumerate(items):
        field = f"{where}, field 'annotations'[{i}]"
        if not isinstance(a, dict):
            raise ProbeInputError(f"{field}: expected a JSON object, got {type(a).__name__}")
        count = a.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ProbeInputError(f"{field}.count: expected a vote count ≥ 1, got {count!r}")
        lists = []
        for key in ("answers", "en_answers"):
            value = a.get(key)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ProbeInputError(f"{field}.{key}: expected a list of strings, got {value!r}")
            # The published files hold 28 empty `en_answers` lists and 7 blank strings: an
            # untranslated answer is no answer to match, not a malformed file.
            lists.append(tuple(v.strip() for v in value if v.strip()))
        out.append(Annotation(answers=lists[0], en_answers=lists[1], count=count))
    return tuple(out), dict(idks)


def _templates(path: Path, wanted: Sequence[str]) -> dict[str, Template]:
    """The `wanted` template ids of one prompts file (the first row of a repeated id)."""
    found: dict[str, Template] = {}
    for row_no, row in enumerate(_read_csv(path, ("id", "English", "Translation")), start=2):
        tid = (row["id"] or "").strip()
        if tid not in wanted or tid in found:
            continue
        for field in ("English", "Translation"):
            if "{q}" not in (row[field] or ""):
                raise ProbeInputError(f"{path}: row {row_no}, template {tid!r}, field {field!r}: expected a template "
                                      f"with {{q}} where the question goes, got {row[field]!r}")
        found[tid] = Template(template_id=tid, local=row["Translation"], english=row["English"])
    missing = [t for t in wanted if t not in found]
    if missing:
        raise ProbeInputError(f"{path}: no template {missing} (bench.templates); the file has "
                              f"{list(dict.fromkeys(r['id'] for r in _read_csv(path, ('id',))))}")
    return found
