"""GlobalOpinionQA: survey questions with each country's answer shares, read and validated.

The upstream file is `data/global_opinions.csv` of the hub dataset `Anthropic/llm_global_opinions`
(columns `question`, `selections`, `options`, `source`). `selections` is the Python repr of a
`defaultdict(<class 'list'>, {country: [share per option]})` and `options` the repr of a list;
both are read as literals only: the exact `defaultdict(<class 'list'>, …)` wrapper is removed
by pattern and the rest goes to `ast.literal_eval`, which evaluates no name, call or operator
(anything else is an input error naming the row). Every error names the file, the row and the
field. Quirks of the real data are counted, not fatal: distributions whose shares are all zero
are skipped, sums off 1 by less than `bench.sum_tolerance` are renormalised.
"""

from __future__ import annotations

import ast
import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from probe.benches.orders import DEFAULT_CAP, OrderCap, OrderName, Seed
from probe.benches.spec_header import DownloadedBench
from probe.benches.sources import fetch
from probe.config import Ge, nearest
from probe.errors import ProbeInputError, bounded_repr
from probe.files import utf8_error, wide_csv_fields
from probe.types import LETTERS, Item, Option

HUB_REVISION = "cb2880488749218abb81802a94c2c62ebfde2f35"
"""The dataset repository's commit the default download names. Neither it nor the file's sha256
could be checked against the hub when this bench was written (unreachable), so no checksum is
pinned by default: the first download's is recorded and checked on reuse, and `bench.sha256`
pins one (checked against a local `bench.path` as well)."""
SOURCE_URL = (f"https://huggingface.co/datasets/Anthropic/llm_global_opinions/resolve/{HUB_REVISION}"
              "/data/global_opinions.csv")
MAX_DOWNLOAD_BYTES = 64 << 20
"""The upstream CSV is a few MB; anything far larger is not it."""
COLUMNS: tuple[str, ...] = ("question", "selections", "options", "source")
SOURCES: tuple[str, ...] = ("GAS", "WVS")
MAX_OPTIONS = len(LETTERS)
RENORMALISED_ABOVE = 1e-9
"""A distribution counts as renormalised when its sum is off 1 by more than this (float noise of
adding three-decimal shares is ~1e-16)."""
_DEFAULTDICT = re.compile(r"\Adefaultdict\(<class 'list'>, (\{.*\})\)\Z", re.DOTALL)
VOLUNTEERED = re.compile(r"[(\[]\s*(?:vol\.?|volunteered|do not read|don[’']?t read)\s*[)\]]", re.IGNORECASE)
"""An option the interviewer did not read out (`(VOL)`, `(Vol.)`, `(DO NOT READ)`): an answer some
respondents volunteered, not one every respondent was offered (`bench.drop_volunteered`)."""
REFUSAL = re.compile(r"\A(?:dk|d/k|don[’']?t know|dont know|do not know|refused|refusal|refuse to answer|no answer|"
                     r"no response|(?:other )?missing|not asked|not applicable|not available|n/?a)\b.*\Z",
                     re.IGNORECASE | re.DOTALL)
"""A survey's non-answer code, read on the option text with any volunteered marker removed: every
spelling of don't know / refused / no answer (`DK/Refused`, `Don't know/Refused`, `No answer/refused`),
and the processing codes (`Missing; Unknown`, `Other missing; …`, `Not asked`, `Not applicable`).
Removed by `bench.drop_refusals`."""


def is_refusal(option: str) -> bool:
    """Whether an option text is a non-answer code (`REFUSAL`; a `(VOL)` marker does not hide one)."""
    return bool(REFUSAL.match(VOLUNTEERED.sub(" ", option).strip(" .;,")))


def is_volunteered(option: str) -> bool:
    """Whether an option is marked as volunteered, not read out (and is not a non-answer code)."""
    return bool(VOLUNTEERED.search(option)) and not is_refusal(option)


Condition = Literal["default", "cross_national"]


@dataclass(frozen=True)
class GlobalOpinionSpec(DownloadedBench):
    """The `bench:` block of GlobalOpinionQA: survey questions, 2–18 options, answer shares of up to 130 countries."""

    name: str = "globalopinion"
    kind: str = "globalopinion"
    path: str | None = None
    """A local global_opinions.csv (the upstream schema); null downloads `url` once into the cache."""
    url: str = SOURCE_URL
    """The upstream CSV at a dataset revision, downloaded once into $PROBE_CACHE/data (revision not verified: the hub was unreachable when this bench was written)."""
    sha256: str | None = None
    """Expected sha256 of the file (bench.path or the download); a mismatch stops the run. No default: the upstream file's checksum is unknown here. null: recorded at the first download, checked on reuse."""
    max_download_bytes: Annotated[int, Ge(1)] = MAX_DOWNLOAD_BYTES
    """Largest download of `url` accepted (bytes; default 64 MiB); a larger one stops, nothing cached."""
    countries: tuple[str, ...] = ()
    """Countries to compare with (the survey's spelling, e.g. `Britain`); empty keeps all."""
    source: Literal["GAS", "WVS", "all"] = "all"
    """Survey: GAS (Pew Global Attitudes), WVS (World Values Survey) or all."""
    limit: Annotated[int, Ge(1)] | None = None
    """Ask only the first N questions (file order, after the other selections); null = all."""
    conditions: tuple[Condition, ...] = ("default", "cross_national")
    """default: no country named; cross_national: "How would someone from {country} answer …", one prompt set per country."""
    drop_refusals: bool = False
    """Remove non-answer codes (every spelling of don't know / refused / no answer, and Missing; …, Not asked, Not applicable) from the prompt and the shares, renormalised."""
    drop_volunteered: bool = False
    """Remove the options not read to respondents (marked (VOL) or (DO NOT READ)) from the prompt and the shares, renormalised."""
    strip_question: bool = False
    """Strip leading and trailing whitespace from each question's text; false keeps it verbatim, as Durmus et al.'s published prompt has it."""
    min_questions: Annotated[int, Ge(1)] = 5
    """Questions a country needs to be ranked; countries with fewer are listed apart, never named in the headline."""
    rank_samples: Literal["national", "all"] = "national"
    """Which samples the ranking and the headline name: national (non-national and old samples listed apart) | all."""
    sum_tolerance: Annotated[float, Ge(0)] = 0.02
    """Largest |sum of a country's shares − 1| accepted (then renormalised and counted); more is an input error."""
    text_form: Literal["hybrid", "cloze"] = "cloze"
    """Answer-text reading (backend.mode=text|letters+text): cloze (the question alone, each option's text its continuation) | hybrid (options listed, the answer's text asked)."""
    orders: OrderName = "rotations"
    """Option orderings per question (docs/concepts/orders.md): rotations (K) | permutations (K!) | williams (K or 2K) | reverse (2: the scale's order and its reverse)."""
    orders_cap: OrderCap = DEFAULT_CAP
    """Most orderings per question a design may present; more is refused unless `permutations` samples."""
    orders_sample: OrderCap | None = None
    """Under `permutations` above the cap: draw this many orderings without replacement (null: refuse)."""
    orders_seed: Seed = 0
    """Seed of the `orders_sample` draw (recorded in the manifest)."""


@dataclass(frozen=True)
class Question:
    """One survey question: its item (options in source order) and each country's answer shares."""

    item: Item
    source: str
    row: int
    """1-based data row in the file (the header is row 0)."""
    shares: tuple[tuple[str, tuple[float, ...]], ...]
    """Country → share of respondents per option (source order, summing to 1), file order."""


@dataclass(frozen=True)
class Counts:
    """What the loader set aside or adjusted, for the manifest and the report."""

    questions_read: int = 0
    distributions_read: int = 0
    zero_distributions: int = 0
    """Distributions whose shares are all zero (skipped: nothing to compare with)."""
    zero_questions: int = 0
    """Questions left with no distribution (skipped)."""
    renormalised: int = 0
    """Distributions whose sum was off 1 by more than 1e-9 (within the tolerance) and were rescaled."""
    refusal_options: int = 0
    """Non-answer options removed (`bench.drop_refusals`)."""
    volunteered_options: int = 0
    """Volunteered options removed (`bench.drop_volunteered`)."""


def resolve_source(spec: GlobalOpinionSpec, cache_dir: Path) -> Path:
    """The CSV to read: `spec.path`, or the cached download of `spec.url` (parsed before it is cached)."""
    return fetch(spec.path, spec.url, spec.sha256, cache_dir / "globalopinion", load_questions,
                 spec.max_download_bytes)


def load_questions(path: Path, sum_tolerance: float = 0.02, drop_refusals: bool = False,
                   drop_volunteered: bool = False, strip_question: bool = False) -> tuple[list[Question], Counts]:
    """Read and validate the whole file; all-zero distributions (and questions left with none) are
    skipped; non-answer and volunteered options removed when asked (`Drop`). Question text is kept
    verbatim unless `strip_question`."""
    rows = _read_rows(path)
    counts: dict[str, int] = {"questions_read": len(rows)}
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    questions = []
    for number, row in enumerate(rows, start=1):
        q, options = _question(row, number, f"{path}: row {number}", sum_tolerance,
                               Drop(drop_refusals, drop_volunteered, strip_question), counts)
        key = (" ".join(q.item.question.split()), options)
        if key in seen:
            raise ProbeInputError(f"{path}: row {number}, field 'question': duplicate of row {seen[key]} "
                                  f"(same question and options: {q.item.question[:80]!r})")
        seen[key] = number
        if q.shares:
            questions.append(q)
        else:
            counts["zero_questions"] = counts.get("zero_questions", 0) + 1
    return questions, Counts(**counts)


def _country_like(name: str, known: Sequence[str]) -> str | None:
    """The file's country a mistyped `name` most likely means: one it begins (`India` → `India
    (Current national sample)`), else the closest spelling."""
    starts = [k for k in known if k.casefold().startswith(name.strip().casefold())]
    return starts[0] if starts else nearest(name, known)


def select(questions: Sequence[Question], spec: GlobalOpinionSpec) -> list[Question]:
    """The questions of `spec.source`, restricted to `spec.countries` (questions without any
    dropped), then the first `spec.limit`."""
    known = {c for q in questions for c, _ in q.shares}
    unknown = [c for c in spec.countries if c not in known]
    if unknown:
        hints = {c: _country_like(c, sorted(known)) for c in unknown}
        said = "; ".join(f"{c!r}: did you mean {h!r}?" for c, h in hints.items() if h)
        raise ProbeInputError(f"bench.countries: unknown countries {unknown}" + (f" ({said})" if said else "")
                              + f"; the file has {len(known)}: {sorted(known)}")
    wanted = set(spec.countries)
    out = []
    for q in questions:
        if spec.source != "all" and q.source != spec.source:
            continue
        shares = tuple((c, s) for c, s in q.shares if not wanted or c in wanted)
        if shares:
            out.append(Question(item=q.item, source=q.source, row=q.row, shares=shares))
    return out[: spec.limit]


def _read_rows(path: Path) -> list[dict[str, str]]:
    """The data rows as dicts; a row with too few or too many fields is an error naming it."""
    try:
        with wide_csv_fields(), path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, strict=True)
            header = next(reader, None)
            if header is None or [h.strip() for h in header] != list(COLUMNS):
                raise ProbeInputError(f"{path}: expected the columns {list(COLUMNS)}, got {header}")
            rows = []
            for values in reader:
                if len(values) != len(COLUMNS):
                    raise ProbeInputError(f"{path}: row {len(rows) + 1} (line {reader.line_num}): malformed CSV: "
                                          f"{len(values)} fields, expected {len(COLUMNS)} {list(COLUMNS)}")
                rows.append(dict(zip(COLUMNS, values)))
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except csv.Error as e:
        raise ProbeInputError(f"{path}: row {len(rows) + 1} (line {reader.line_num}): malformed CSV ({e})") from None
    if not rows:
        raise ProbeInputError(f"{path}: no data rows")
    return rows


def literal(text: str, where: str, name: str) -> Any:
    """A Python literal (`ast.literal_eval`: no names, calls or operators are evaluated)."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        raise ProbeInputError(f"{where}, field {name!r}: not a Python literal ({type(e).__name__}); "
                              f"got {_excerpt(text)}") from None


def parse_selections(text: str, where: str) -> dict[str, list[float]]:
    """`defaultdict(<class 'list'>, {country: [shares]})` (or the bare dict) → the dict, checked for types."""
    match = _DEFAULTDICT.match(text.strip())
    value = literal(match.group(1) if match else text, where, "selections")
    _no_repeated_keys(match.group(1) if match else text, where)
    if not isinstance(value, dict) or not value:
        raise ProbeInputError(f"{where}, field 'selections': expected a non-empty dict of country → list of shares "
                              f"(or its defaultdict repr), got {_excerpt(text)}")
    seen: set[str] = set()
    for country, shares in value.items():
        if not isinstance(country, str) or not country.strip():
            raise ProbeInputError(f"{where}, field 'selections': a country must be a non-empty string, "
                                  f"got {bounded_repr(country)}")
        if country.strip() in seen:
            raise ProbeInputError(f"{where}, field 'selections': country {bounded_repr(country.strip())} is given "
                                  "twice (perhaps once with spaces around it); give each country once")
        seen.add(country.strip())
        if not isinstance(shares, list) or not all(_is_number(s) for s in shares):
            raise ProbeInputError(f"{where}, field 'selections', country {country!r}: expected a list of numbers, "
                                  f"got {_excerpt(repr(shares))}")
    return value


def _no_repeated_keys(text: str, where: str) -> None:
    """A dict literal that names a key twice reads as its last value alone: refused instead (the
    text parsed as a literal just before, so it parses here)."""
    body = ast.parse(text.strip(), mode="eval").body
    if isinstance(body, ast.Dict):
        keys = [k.value for k in body.keys if isinstance(k, ast.Constant)]
        repeated = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if repeated is not None:
            raise ProbeInputError(f"{where}, field 'selections': country {bounded_repr(repeated)} is given twice; "
                                  "give each country once")


def parse_options(text: str, where: str) -> list[str]:
    """The option list: strings, or numbers (0–10 scales list inner points as floats: `1.0` → `1`)."""
    value = literal(text, where, "options")
    if not isinstance(value, list) or not all(isinstance(o, str) or _is_number(o) for o in value):
        raise ProbeInputError(f"{where}, field 'options': expected a list of strings or numbers, got {_excerpt(text)}")
    out = [_option_text(o) for o in value]
    if not 2 <= len(out) <= MAX_OPTIONS:
        raise ProbeInputError(f"{where}, field 'options': expected 2 to {MAX_OPTIONS} options, got {len(out)}")
    if any(not o for o in out):
        raise ProbeInputError(f"{where}, field 'options': an option is empty: {out}")
    seen: dict[str, int] = {}
    for i, text in enumerate(out):  # as DiSCo's loader: the model cannot tell two such options apart,
        key = " ".join(text.split()).casefold()  # and their shares and text mass would be counted twice
        if key in seen:
            raise ProbeInputError(f"{where}, field 'options': option {i + 1} ({bounded_repr(text)}) repeats option "
                                  f"{seen[key] + 1} (up to case and spacing); every option of a question must differ")
        seen[key] = i
    return out


@dataclass(frozen=True)
class Drop:
    """Which option classes the loader removes."""

    refusals: bool = False
    volunteered: bool = False
    strip_question: bool = False
    """Not an option class: whether the question's text loses its outer whitespace (`bench.strip_question`)."""

    def drops(self, option: str) -> str | None:
        """The counter an option is removed under (None: kept)."""
        if self.refusals and is_refusal(option):
            return "refusal_options"
        if self.volunteered and is_volunteered(option):
            return "volunteered_options"
        return None


def _question(row: dict[str, str], number: int, where: str, tolerance: float, drop: Drop,
              counts: dict[str, int]) -> tuple[Question, tuple[str, ...]]:
    """One row's question (non-answer and volunteered options removed when asked) and its full option list."""
    question = row["question"].strip() if drop.strip_question else row["question"]
    if not question.strip():
        raise ProbeInputError(f"{where}, field 'question': empty")
    source = row["source"].strip()
    if source not in SOURCES:
        raise ProbeInputError(f"{where}, field 'source': expected one of {list(SOURCES)}, got {source!r}")
    options = parse_options(row["options"], where)
    dropped = [drop.drops(o) for o in options]
    keep = [i for i, why in enumerate(dropped) if why is None]
    for why in dropped:
        if why is not None:
            _add(counts, why, 1)
    shares = []
    for country, values in parse_selections(row["selections"], where).items():
        _add(counts, "distributions_read", 1)
        checked = _shares(values, len(options), f"{where}, field 'selections', country {country!r}", tolerance)
        kept = [checked[i] for i in keep]
        total = math.fsum(kept)
        if total == 0:
            _add(counts, "zero_distributions", 1)
            continue
        if abs(total - 1) > RENORMALISED_ABOVE:
            _add(counts, "renormalised", 1)
        shares.append((country.strip(), tuple(v / total for v in kept)))
    if len(keep) < 2:  # every option but one was dropped: no choice left to ask
        shares = []
    item = Item(item_id=f"goqa-{number:04d}", question=question, category=source,
                options=tuple(Option(key=str(i), text=options[i], group=options[i]) for i in keep))
    return Question(item=item, source=source, row=number, shares=tuple(shares)), tuple(options)


def _shares(values: list[float], k: int, where: str, tolerance: float) -> list[float]:
    """One country's shares: K numbers in [0, 1], summing to 1 within `tolerance` (or all zero)."""
    if len(values) != k:
        raise ProbeInputError(f"{where}: {len(values)} shares for {k} options")
    try:
        out = [float(v) for v in values]
    except OverflowError:  # an integer of thousands of digits has no float
        raise ProbeInputError(f"{where}: a share is too large for a number, got {bounded_repr(values)}") from None
    bad = [v for v in out if not (math.isfinite(v) and 0 <= v <= 1)]
    if bad:
        raise ProbeInputError(f"{where}: shares must lie in [0, 1], got {bad[0]!r} in {bounded_repr(out)}")
    total = math.fsum(out)
    if total != 0 and abs(total - 1) > tolerance:
        raise ProbeInputError(f"{where}: shares sum to {total:.6g}, more than {tolerance} from 1 "
                              f"(bench.sum_tolerance)")
    return out


def _add(counts: dict[str, int], key: str, n: int) -> None:
    counts[key] = counts.get(key, 0) + n


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _option_text(o: str | float) -> str:
    if isinstance(o, float) and o.is_integer():
        return str(int(o))
    return " ".join(str(o).split())


def _excerpt(text: str, n: int = 120) -> str:
    return repr(text if len(text) <= n else text[:n] + "…")
