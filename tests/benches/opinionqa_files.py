"""Small files in OpinionQA's published schema (and probe's survey table), written by the tests.

Five questions, three attributes: SEX (Male, Female), POLPARTY (Republican, Democrat,
Independent), AGE (18-29 with 20 respondents and 65+ with 4,000, answering alike), and the
whole panel. Question Q3 has a middle option at position 1.5; every question offers `Refused`.
"""

from __future__ import annotations

import csv
import math
import json
from pathlib import Path

import numpy as np

QUESTIONS = [
    ("Q1_W1", "How worried are you, if at all, about driverless vehicles?",
     ["Very worried", "Somewhat worried", "Not too worried", "Not at all worried", "Refused"], [1.0, 2.0, 3.0, 4.0]),
    ("Q2_W1", "Would you want to ride in a driverless vehicle?", ["Yes", "No", "Refused"], [1.0, 2.0]),
    ("Q3_W1", "Has what you heard been mostly positive, mostly negative, or a mix of both?",
     ["Mostly positive", "Mostly negative", "A mix of both", "Refused"], [1.0, 2.0, 1.5]),
    ("Q4_W1", "  How likely is it that you will care for an aging parent? ",
     ["Very likely", "Somewhat likely", "Not too likely", "Refused"], [1.0, 2.0, 3.0]),
    ("Q5_W1", "Should the rules require a person in the driver's seat, yes, likely?",
     ["Yes, likely", "No, not likely", "Refused"], [1.0, 2.0]),
]
GROUPS = {"SEX": ["Male", "Female"], "POLPARTY": ["Republican", "Democrat", "Independent"], "AGE": ["18-29", "65+"]}
SIZE = {"18-29": 20, "65+": 4000}


def counts() -> dict[str, dict[str, dict[str, float]]]:
    """attribute → question key → group → option → weighted count (fixed seed)."""
    rng = np.random.default_rng(7)
    out: dict[str, dict[str, dict[str, float]]] = {a: {} for a in GROUPS}
    for key, _, options, _ in QUESTIONS:
        for attribute, groups in GROUPS.items():
            shares = rng.dirichlet(np.ones(len(options)) * 2)
            out[attribute][key] = {}
            for g in groups:
                if attribute != "AGE":
                    shares = rng.dirichlet(np.ones(len(options)) * 2)
                n = SIZE.get(g, 800)
                out[attribute][key][g] = {o: round(float(s * n), 3) for o, s in zip(options, shares)}
    return out


def write_wave(folder: Path) -> Path:
    """An OpinionQA `human_resp/<wave>/` folder; returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "info.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["", "key", "option_mapping", "question", "references", "option_ordinal"])
        for i, (key, text, options, ordinal) in enumerate(QUESTIONS):
            mapping = {float(j + 1) if o != "Refused" else 99.0: o for j, o in enumerate(options)}
            w.writerow([i, key, repr(mapping), text, repr(options), repr(ordinal)])
    with (folder / "metadata.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["", "key", "options"])
        for i, (a, groups) in enumerate(GROUPS.items()):
            w.writerow([i, a, repr(groups)])
    data = counts()
    texts = {k: (t, o) for k, t, o, _ in QUESTIONS}
    for attribute, by_key in data.items():
        entries = {k: {"MC_options": texts[k][1], "question_text": texts[k][0], **groups}
                   for k, groups in by_key.items()}
        (folder / f"{attribute}_data.json").write_text(json.dumps(entries))
    panel = {k: {"MC_options": texts[k][1], "question_text": texts[k][0], **by_key[k]}
             for k, by_key in [(k, data["POLPARTY"]) for k in data["POLPARTY"]]}
    (folder / "NONE_data.json").write_text(json.dumps(panel))
    return folder


def write_table(path: Path, fmt: str = "jsonl") -> Path:
    """The same content as `write_wave`, as probe's survey table (whole panel: the POLPARTY sum)."""
    data = counts()
    rows = []
    for key, text, options, ordinal in QUESTIONS:
        positions = [*ordinal, *([None] * (len(options) - len(ordinal)))]
        base = {"question_id": key, "question": text, "options": options, "positions": positions}
        for attribute in GROUPS:
            for g, c in data[attribute][key].items():
                rows.append({**base, "attribute": attribute, "group": g, "counts": c})
        panel = {o: math.fsum(data["POLPARTY"][key][g][o] for g in GROUPS["POLPARTY"]) for o in options}
        rows.append({**base, "attribute": "NONE", "group": "Overall", "counts": panel})
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            for r in rows:
                w.writerow({k: v if isinstance(v, str) else json.dumps(v) for k, v in r.items()})
    return path
