"""GlobalOpinionQA's file as probe's survey table (`bench=opinionqa bench.format=table`).

One JSON Lines row per (question, country): `question_id` (the bench's item id, `goqa-0001` …),
`question` (verbatim), `options`, `attribute` `country`, `group` the survey's country label,
`shares` (no `n`: the file gives no sample sizes, so the survey error is unknown there). A
question that is an ordered scale (`scales.scale_positions`) gets `positions` (its scale
options' survey-order index, null elsewhere) and `refusal` (the options off the scale). Read
with `bench.refusal=keep`, the table's `jsd_similarity` is this bench's similarity (every option
compared) and its representativeness this bench's ordinal similarity (W1 over the scale's options).
"""

from __future__ import annotations

import json
from pathlib import Path

from probe.benches.globalopinion.data import load_questions
from probe.benches.globalopinion.scales import scale_positions
from probe.files import write_text


def survey_rows(path: Path) -> list[dict]:
    """The survey-table rows of a global_opinions.csv (question text verbatim, every option kept)."""
    questions, _ = load_questions(path)
    rows = []
    for q in questions:
        options = [o.text for o in q.item.options]
        base: dict = {"question_id": q.item.item_id, "question": q.item.question, "options": options}
        on = scale_positions(options)
        if on is not None:
            base["positions"] = [on.index(i) if i in on else None for i in range(len(options))]
            base["refusal"] = [o for i, o in enumerate(options) if i not in on]
        for country, shares in q.shares:
            rows.append({**base, "attribute": "country", "group": country, "shares": dict(zip(options, shares))})
    return rows


def write_survey_table(path: Path, out: Path) -> int:
    """Write `survey_rows(path)` as JSON Lines to `out`; the number of rows."""
    rows = survey_rows(path)
    write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return len(rows)
