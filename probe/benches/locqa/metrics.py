"""LocQA metrics (docs/benchmarks/locqa.md, docs/results/contract.md) from questions, prompts and judgements.

Inputs are duck-typed records (the loader's `probe.benches.locqa` types fit; the frozen
dataclasses below are the minimal shapes, used by tests and re-analysis from parquet):
questions give the gold answers, prompts say which response belongs to which (template,
language[, locale]), judgements are the rows of `judgements.parquet`.

Answer identity. For one template × language, answers are compared by `normalize_answer`
(the collision rule: `6 ans ` is `6 ans`). Locale c "is ≡ A_US" when the `semantic_match`
judgement lists it or its normalised answer equals the US answer's; every locale holding the
same normalised answer as a matched one is matched too. The US answer and the matched
locales' answers form one class (the US class), every other normalised locale answer its
own class. A response "contains" an answer when a mentioned answer is in its class, so a
Spanish response offering `Lunes` counts as giving the US answer `Monday` once the semantic
judgement says `Lunes` ≡ `Monday`, and vice versa.

Per language L (locales C_L), questions Q_L = templates with a usable judgement for L:
- `B_US(L) = (1/|Q_L|) Σ_q 1[US class ∈ M(q)] − (1/|Q_L|) Σ_q k_q/|C_L|`, k_q = number of
  locales ≡ A_US (the paper's expected term).
- `m_q(c)` = locales of L in c's class; `N_data(c) = Σ_q m_q(c)`; `N_model(c) = Σ_q 1[c's class
  ∈ M(q)]`; `B_R(c) = (N_model(c)/Σ_k N_model(k)) / (N_data(c)/Σ_k N_data(k))`;
  `B_R_dev(L)` = mean over c of `|B_R(c) − 1|`.
- `B_US_macro`: mean of B_US over the non-English languages; `B_R_dev_macro`: mean of
  B_R_dev over the languages with more than one locale (English included, as in the paper).
- Taxonomy, over non-English responses pooled (each a share of all of them). With the US
  answer given: `valid_overlap` (k = |C_L|), `selection` (0 < k < |C_L|), `intrusion` (k = 0
  and some local answer also given), `erasure` (k = 0, no local answer). These four are
  disjoint and sum to the pooled observed rate. `framing`: `framing_style = US_COMPARISON`,
  with or without the US answer (it overlaps the others).
- `no_answer_rate`: responses with no gold answer at all, over all languages (English
  included, as the paper's App. F); `no_answer_rate_non_english` the same over non-English
  responses; `multiplicity`: mean number of distinct answer classes per non-English response
  (zeros included; the US answer counts, being valid for the USA locale).
- `by_category`: B_US_macro and B_R_dev_macro over the templates of each category, the latter
  over non-English languages with more than one locale (the paper's Table 5).
- `explicit` (only when a prompt has mode `explicit`), over all explicit prompts: `accuracy`
  = share with `match_locale`; `us_hallucination_share` = share of the wrong ones
  (`not match_locale`) that mention the US answer.

NaN conventions: B_US is NaN for a language with no usable question; B_R is NaN for every
locale of a language whose responses never contain any of its locales' answers (the shares
are undefined: not 0, which would read as "erased"), and B_R_dev then NaN; macro averages
and pooled rates skip NaN members and are NaN when none is left; `us_hallucination_share` is
NaN without errors. The same holds per bootstrap replicate.

Judge errors: a judgement with `judge_error` set is excluded — an implicit one removes that
response, a semantic one removes its template × language from every term — and counted in
`n_judge_errors` (beside `metrics`, not inside it, so `metrics` keeps exactly the documented keys).
Bootstrap: templates are resampled (all languages of a template move together); every
metric is a function of weighted sums over templates, so B replicates are one pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probe.errors import ProbeInputError
from probe.metrics.core import (
    AnalysisOptions,
    Measured,
    bootstrap_weights,
    nanmean,
    percentile_ci,
    ratio,
    to_scalars,
    wsum,
)
from probe.prompts.parse import normalize_answer

ENGLISH = "English"
TAXONOMY: tuple[str, ...] = ("erasure", "intrusion", "selection", "valid_overlap", "framing")
_US = "\x00US"  # class id of the US answer; cannot collide with a normalised answer


@dataclass(frozen=True)
class LocQAItem:
    """One template in one language (the loader's `LocQAQuestion` has the same fields)."""

    template: str
    category: str
    language: str
    answers: tuple[tuple[str, str], ...]
    """(locale, raw answer); objects with `.locale` and `.answer` are accepted too."""
    us_answer: str
    """The template's English USA answer, raw."""


@dataclass(frozen=True)
class PromptRef:
    """The prompt fields the metrics need (a row of `prompts.parquet`, or the loader's prompt)."""

    prompt_id: int
    template: str
    language: str
    mode: str
    """`zero_shot` | `three_shot` | `explicit`."""
    locale: str | None = None


@dataclass(frozen=True)
class Judgement:
    """One row of `judgements.parquet` (docs/results/contract.md)."""

    task: str
    """`semantic_match` | `implicit` | `explicit`."""
    template: str
    language: str
    prompt_id: int | None = None
    """None for semantic matching (one per template × language, not per response)."""
    mentioned_answers: Sequence[str] | None = None
    framing_style: str | None = None
    matches: Sequence[str] | None = None
    """Locale names (or answer strings, which select every locale holding them)."""
    match_locale: bool | None = None
    mentions_us_answer: bool | None = None
    judge_error: str | None = None
    judge: str = ""

    @classmethod
    def from_record(cls, row: Mapping[str, Any]) -> Judgement:
        """From a parquet/pandas record: NaN/NA cells become None, list cells tuples."""
        def clean(v: Any) -> Any:
            if v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ == "NAType":
                return None
            if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
                v = v.tolist()
            return tuple(v) if isinstance(v, list) else v

        names = cls.__dataclass_fields__
        return cls(**{k: clean(v) for k, v in row.items() if k in names})


@dataclass
class LanguageSums:
    """Per-template arrays of one language; axis 0 is the template (`LocQASums.templates`)."""

    locales: list[str]
    valid: np.ndarray  # [T] 1 if the template's response for L is usable
    obs: np.ndarray  # [T] US class mentioned
    exp: np.ndarray  # [T] k_q / |C_L|
    n_data: np.ndarray  # [T, C] m_q(c)
    n_model: np.ndarray  # [T, C] c's class mentioned
    flags: dict[str, np.ndarray] = field(default_factory=dict)
    """[T] taxonomy flags, `no_answer` and `multiplicity` (count of classes)."""


@dataclass
class LocQASums:
    templates: list[str]
    categories: np.ndarray  # [T] category name per template
    languages: dict[str, LanguageSums]
    explicit: dict[str, np.ndarray] | None
    """[T] counts `n`, `correct`, `wrong`, `wrong_us` over explicit prompts; None if no explicit mode."""
    n_judge_errors: int
    judge_errors_by_task: dict[str, int]


def _pairs(answers: Iterable[Any]) -> list[tuple[str, str]]:
    return [(a.locale, a.answer) if hasattr(a, "locale") else (a[0], a[1]) for a in answers]


class _Question:
    """Answer classes of one template × language (see the module docstring)."""

    def __init__(self, q: Any, matches: Sequence[str], where: str) -> None:
        self.pairs = _pairs(q.answers)
        self.locales = [loc for loc, _ in self.pairs]
        keys = [normalize_answer(a) for _, a in self.pairs]
        by_name = {normalize_answer(loc): i for i, loc in enumerate(self.locales)}
        us_keys = {normalize_answer(q.us_answer)}
        for m in matches:
            n = normalize_answer(m)
            if n in by_name:
                us_keys.add(keys[by_name[n]])
            elif n in keys:
                us_keys.add(n)
            else:
                raise ProbeInputError(f"{where}, field 'matches': {m!r} is neither a locale nor an answer of "
                                      f"this question; locales {self.locales}")
        self.us_keys = us_keys
        self.cls = [_US if k in us_keys else k for k in keys]
        self.gold = set(keys) | us_keys

    def classes(self, mentioned: Sequence[str], where: str) -> set[str]:
        out = set()
        for m in mentioned:
            n = normalize_answer(m)
            if n not in self.gold:
                raise ProbeInputError(f"{where}, field 'mentioned_answers': {m!r} is not a gold answer of "
                                      "this question (US or local)")
            out.add(_US if n in self.us_keys else n)
        return out


def locqa_sums(questions: Sequence[Any], prompts: Sequence[Any], judgements: Sequence[Judgement]) -> LocQASums:
    """Reduce the three tables to per-template arrays, validating that they fit together:
    one question per (template, language), one response prompt per question and mode, one
    judgement per prompt and one semantic judgement per judged question; mentioned answers
    and matches must be this question's. Errors name the table, row and field."""
    qs: dict[tuple[str, str], Any] = {}
    for i, q in enumerate(questions):
        if (q.template, q.language) in qs:
            raise ProbeInputError(f"questions: row {i}: duplicate (template {q.template!r}, {q.language})")
        qs[(q.template, q.language)] = q
    # sorted, like every bench's units: runs over one set of templates resample them alike
    templates = sorted({q.template for q in questions})
    t_idx = {t: i for i, t in enumerate(templates)}
    cats = {q.template: q.category for q in questions}
    pr = _check_prompts(prompts, qs)
    sem, per_prompt, errors = _index_judgements(judgements, pr, qs)
    by_task: dict[str, int] = {}
    for task in errors:
        by_task[task] = by_task.get(task, 0) + 1

    langs: dict[str, LanguageSums] = {}
    for lang in dict.fromkeys(q.language for q in questions):
        locales = list(dict.fromkeys(loc for q in questions if q.language == lang for loc, _ in _pairs(q.answers)))
        langs[lang] = _language_sums(lang, locales, templates, qs, pr, sem, per_prompt)
    explicit = None
    if any(p.mode == "explicit" for p in pr.values()):
        explicit = {k: np.zeros(len(templates)) for k in ("n", "correct", "wrong", "wrong_us")}
        for pid, p in pr.items():
            j = per_prompt.get(pid)
            if p.mode != "explicit" or j is None or j.judge_error is not None:
                continue
            where = f"judgements: prompt_id {pid} (task 'explicit')"
            if not isinstance(j.match_locale, bool) or not isinstance(j.mentions_us_answer, bool):
                raise ProbeInputError(f"{where}, fields 'match_locale'/'mentions_us_answer': expected booleans, "
                                      f"got {j.match_locale!r}/{j.mentions_us_answer!r}")
            t = t_idx[p.template]
            explicit["n"][t] += 1
            explicit["correct"][t] += j.match_locale
            explicit["wrong"][t] += not j.match_locale
            explicit["wrong_us"][t] += (not j.match_locale) and j.mentions_us_answer
    return LocQASums(templates=templates, categories=np.array([cats[t] for t in templates], dtype=object),
                     languages=langs, explicit=explicit, n_judge_errors=len(errors), judge_errors_by_task=by_task)


def _check_prompts(prompts: Sequence[Any], qs: Mapping[tuple[str, str], Any]) -> dict[int, Any]:
    pr: dict[int, Any] = {}
    seen: dict[tuple[str, str, str | None], int] = {}
    modes = set()
    for i, p in enumerate(prompts):
        where = f"prompts: row {i} (prompt_id {p.prompt_id})"
        if p.prompt_id in pr:
            raise ProbeInputError(f"{where}: duplicate prompt_id")
        if (p.template, p.language) not in qs:
            raise ProbeInputError(f"{where}: no question for template {p.template!r} in {p.language}")
        if p.mode not in ("zero_shot", "three_shot", "explicit"):
            raise ProbeInputError(f"{where}, field 'mode': expected zero_shot | three_shot | explicit, got {p.mode!r}")
        locale = p.locale if p.mode == "explicit" else None
        if p.mode == "explicit" and locale not in {loc for loc, _ in _pairs(qs[(p.template, p.language)].answers)}:
            raise ProbeInputError(f"{where}, field 'locale': {locale!r} is not a locale of {p.language}")
        if p.mode != "explicit":
            modes.add(p.mode)
        key = (p.template, p.language, locale)
        if key in seen:
            raise ProbeInputError(f"{where}: same question{' and locale' if locale else ''} as prompt_id {seen[key]} "
                                  "(B_US and B_R take one response per question and language)")
        seen[key] = p.prompt_id
        pr[p.prompt_id] = p
    if len(modes) > 1:
        raise ProbeInputError(f"prompts: one implicit mode per run, got {sorted(modes)}")
    return pr


def _index_judgements(judgements: Sequence[Judgement], pr: Mapping[int, Any], qs: Mapping[tuple[str, str], Any]):
    sem: dict[tuple[str, str], Judgement] = {}
    per_prompt: dict[int, Judgement] = {}
    errors: list[str] = []
    for i, j in enumerate(judgements):
        where = f"judgements: row {i} (task {j.task!r}, prompt_id {j.prompt_id})"
        if j.task == "semantic_match":
            key = (j.template, j.language)
            if key not in qs:
                raise ProbeInputError(f"{where}: no question for template {j.template!r} in {j.language}")
            if key in sem:
                raise ProbeInputError(f"{where}: a second semantic_match for template {j.template!r} in {j.language}")
            sem[key] = j
        elif j.task in ("implicit", "explicit"):
            p = pr.get(j.prompt_id)
            if p is None:
                raise ProbeInputError(f"{where}, field 'prompt_id': no such prompt")
            if (j.task == "explicit") != (p.mode == "explicit"):
                raise ProbeInputError(f"{where}, field 'task': prompt {j.prompt_id} has mode {p.mode!r}")
            if j.prompt_id in per_prompt:
                raise ProbeInputError(f"{where}: a second judgement for prompt_id {j.prompt_id}")
            per_prompt[j.prompt_id] = j
        else:
            raise ProbeInputError(f"{where}, field 'task': expected semantic_match | implicit | explicit")
        if j.judge_error is not None:
            errors.append(j.task)
    missing = [pid for pid in pr if pid not in per_prompt]
    if missing:
        raise ProbeInputError(f"judgements: no judgement for prompt_id(s) {missing[:10]}"
                              f"{' …' if len(missing) > 10 else ''} (a failed one is a row with judge_error)")
    return sem, per_prompt, errors


def _language_sums(lang: str, locales: list[str], templates: list[str], qs, pr, sem, per_prompt) -> LanguageSums:
    n_t, n_c = len(templates), len(locales)
    s = LanguageSums(locales=locales, valid=np.zeros(n_t), obs=np.zeros(n_t), exp=np.zeros(n_t),
                     n_data=np.zeros((n_t, n_c)), n_model=np.zeros((n_t, n_c)),
                     flags={k: np.zeros(n_t) for k in (*TAXONOMY, "no_answer", "multiplicity")})
    c_idx = {c: i for i, c in enumerate(locales)}
    responses = {p.template: pid for pid, p in pr.items() if p.language == lang and p.mode != "explicit"}
    for t, template in enumerate(templates):
        pid = responses.get(template)
        if pid is None:
            continue
        j, sj = per_prompt[pid], sem.get((template, lang))
        if sj is None:
            raise ProbeInputError(f"judgements: no semantic_match for template {template!r} in {lang} "
                                  f"(needed by prompt_id {pid})")
        if j.judge_error is not None or sj.judge_error is not None:
            continue
        where = f"judgements: prompt_id {pid} (task 'implicit', {lang})"
        if j.mentioned_answers is None or j.framing_style not in ("US_COMPARISON", "NEUTRAL"):
            raise ProbeInputError(f"{where}: expected 'mentioned_answers' (a list) and 'framing_style' "
                                  f"US_COMPARISON | NEUTRAL, got {j.mentioned_answers!r} / {j.framing_style!r}")
        if sj.matches is None:
            raise ProbeInputError(f"judgements: semantic_match for template {template!r} in {lang}, field "
                                  "'matches': expected a list, got null")
        q = _Question(qs[(template, lang)], sj.matches, f"judgements: semantic_match ({template!r}, {lang})")
        mentioned = q.classes(j.mentioned_answers, where)
        cols = [c_idx[loc] for loc in q.locales]
        size = {c: q.cls.count(c) for c in set(q.cls)}
        k = size.get(_US, 0)
        s.valid[t] = 1.0
        s.obs[t] = _US in mentioned
        s.exp[t] = k / len(q.cls)
        s.n_data[t, cols] = [size[c] for c in q.cls]
        s.n_model[t, cols] = [c in mentioned for c in q.cls]
        local = any(c in mentioned and c != _US for c in q.cls)
        if _US in mentioned:
            kind = ("valid_overlap" if k == len(q.cls) else "selection" if k > 0
                    else "intrusion" if local else "erasure")
            s.flags[kind][t] = 1.0
        s.flags["framing"][t] = j.framing_style == "US_COMPARISON"
        s.flags["no_answer"][t] = not mentioned
        s.flags["multiplicity"][t] = len(mentioned)
    return s


# --- evaluation for item weights -------------------------------------------------------------

def _languages(s: LocQASums, w: np.ndarray) -> tuple[dict, dict, dict]:
    """B_US, B_R and B_R_dev per language for template weights `w` ([..., T])."""
    b_us, b_r, dev = {}, {}, {}
    for lang, ls in s.languages.items():
        wl = w * ls.valid
        n = wl.sum(axis=-1)
        b_us[lang] = ratio(wsum(wl, ls.obs) - wsum(wl, ls.exp), n)
        nd, nm = wsum(wl, ls.n_data), wsum(wl, ls.n_model)  # [..., C]
        p_obs = ratio(nm, nm.sum(axis=-1, keepdims=True))
        p_exp = ratio(nd, nd.sum(axis=-1, keepdims=True))
        r = ratio(p_obs, p_exp)  # NaN when the model gives no answer of L, or c is absent from the resample
        b_r[lang] = {c: r[..., i] for i, c in enumerate(ls.locales)}
        dev[lang] = nanmean(np.abs(r - 1.0))
    return b_us, b_r, dev


def _macros(s: LocQASums, b_us: dict, dev: dict, english: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """B_US macro over non-English languages; |B_R − 1| macro over languages with > 1 locale,
    English among them unless `english=False` (the paper's Table 5, per category)."""
    us = [b_us[lang] for lang in s.languages if lang != ENGLISH]
    multi = [dev[lang] for lang, ls in s.languages.items() if len(ls.locales) > 1 and (english or lang != ENGLISH)]
    shape = next(iter(b_us.values())).shape if b_us else ()
    nan = np.full(shape, np.nan)
    return (nanmean(np.stack(us), axis=0) if us else nan), (nanmean(np.stack(multi), axis=0) if multi else nan)


def evaluate(s: LocQASums, w: np.ndarray) -> dict[str, Any]:
    """The `metrics` tree for template weights `w` (`[T]` → point estimate, `[B, T]` → B
    bootstrap replicates); leaves are arrays over the leading axes of `w`."""
    b_us, b_r, dev = _languages(s, w)
    us_macro, dev_macro = _macros(s, b_us, dev)
    non_en = [ls for lang, ls in s.languages.items() if lang != ENGLISH]

    def pooled(flag: str, langs: Sequence[LanguageSums] = non_en) -> np.ndarray:
        n = sum((wsum(w, ls.valid) for ls in langs), np.zeros(w.shape[:-1]))
        return ratio(sum((wsum(w * ls.valid, ls.flags[flag]) for ls in langs), np.zeros(w.shape[:-1])), n)

    by_category = {}
    for cat in dict.fromkeys(s.categories):
        bu, _, dv = _languages(s, w * (s.categories == cat))
        cu, cd = _macros(s, bu, dv, english=False)
        by_category[str(cat)] = {"B_US_macro": cu, "B_R_dev_macro": cd}
    m: dict[str, Any] = {
        "B_US": b_us, "B_US_macro": us_macro, "B_R": b_r, "B_R_dev": dev, "B_R_dev_macro": dev_macro,
        "taxonomy": {k: pooled(k) for k in TAXONOMY},
        # over all languages, English included, as the paper's App. F; non-English beside it
        "no_answer_rate": pooled("no_answer", list(s.languages.values())),
        "no_answer_rate_non_english": pooled("no_answer"), "multiplicity": pooled("multiplicity"),
        "by_category": by_category,
    }
    if s.explicit is not None:
        e = {k: wsum(w, v) for k, v in s.explicit.items()}
        m["explicit"] = {"accuracy": ratio(e["correct"], e["n"]),
                         "us_hallucination_share": ratio(e["wrong_us"], e["wrong"])}
    return m


def compute(questions: Sequence[Any], prompts: Sequence[Any], judgements: Sequence[Judgement],
            opts: AnalysisOptions) -> Measured:
    """`{"metrics": M, "ci95": M', "n_judge_errors": int, "judge_errors_by_task": {task: int}}`,
    with the replicates behind `ci95` as block `metrics`.

    `ci95` mirrors `metrics` with `[lo, hi]` percentile intervals over `opts.n_boot`
    resamples of templates (seeded by `opts.seed`); `{}` when `n_boot == 0`.
    """
    s = locqa_sums(questions, prompts, judgements)
    n_t = len(s.templates)
    out = Measured({"metrics": to_scalars(evaluate(s, np.ones(n_t))), "ci95": {}})
    if opts.n_boot > 0:
        out.replicates["metrics"] = evaluate(s, bootstrap_weights(n_t, opts.n_boot, opts.seed))
        out["ci95"] = percentile_ci(out.replicates["metrics"])
    out["n_judge_errors"] = s.n_judge_errors
    out["judge_errors_by_task"] = s.judge_errors_by_task
    return out
