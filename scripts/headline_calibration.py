"""Black-box calibration of DiSCo's headline: a finished tiny-model DiSCo run (C0, 48 items over 8
cultures) whose `scores.parquet` is replaced with letter log-probs drawn from a known world
(`probe.metrics.preference_calibration`), then `probe analyze`, 20 replicates per world (no
preference; a planted one). Counts, per world: replicates with every `expected`/`debiased` number
inside its `ci95` twin, `ci95.expected.C0.KL` covering the population KL (Monte Carlo), the test
`p.expected.C0.KL` rejecting at 0.05, and *In short* naming a culture. The numbers of
docs/concepts/intervals.md.

    python scripts/headline_calibration.py [--replicates 20] [--work DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from probe.metrics.core import kl_to_uniform
from probe.metrics.preference_calibration import Design, LetterWorld, draw_logprobs, population_shares
from probe.pipeline.analysis import analyze_run

CULTURES = ["Algeria", "Assam", "China", "Ethiopia", "Greece", "Indonesia", "South_Korea", "Spain"]
WORLDS = {"null": LetterWorld(), "planted": LetterWorld(preference=(0.7, 0.47, 0.23, 0.0, 0.0, -0.23, -0.47, -0.7))}


def base_run(work: Path, factors: str | None = None) -> Path:
    """The finished tiny-model run every replicate starts from (made once); `factors` (e.g.
    `labels`) makes it a factor run."""
    run = work / ("base" if factors is None else f"base-{factors}")
    if (run / "DONE").exists():
        return run
    rows = []
    for i in range(48):
        shown = [CULTURES[(i + s) % 8] for s in range(4)]
        rows.append({"QID": f"Q-{i}", "ID": f"item-{i}", "Question": f"Which everyday choice number {i} would you pick?",
                     "Options": json.dumps({x: f"option {x} of item {i}" for x in "ABCD"}),
                     "Metadata": json.dumps(dict(zip("ABCD", shown))), "User_Info": "", "User_Instruction": "x",
                     **{f"Context_L{s + 1}": f"In {c}, option {'ABCD'[s]} is common." for s, c in enumerate(shown)}})
    with open(work / "items.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    subprocess.run([sys.executable, "-m", "probe", "model=tiny", "bench=disco", f"bench.path={work / 'items.csv'}",
                    "bench.conditions=[C0]", f"hydra.run.dir={run}", "progress=false",
                    *([f"factors=[{factors}]"] if factors else [])], check=True,
                   env={**os.environ, "PROBE_CACHE": str(work / "cache"), "HF_HUB_OFFLINE": "1"}, capture_output=True)
    return run


def prompt_design(run: Path) -> Design:
    prompts = pq.read_table(run / "prompts.parquet").to_pydict()
    items = sorted(set(prompts["item_id"]), key=lambda s: int(s.split("-")[1]))
    item = np.array([items.index(i) for i in prompts["item_id"]])
    option = np.array(prompts["order"])
    group = np.array([[CULTURES.index(g) for g in row] for row in prompts["groups"]])
    return Design(item=item, rotation=np.array(prompts["rotation"]), option=option, group=group)


def replace_scores(run: Path, lp: np.ndarray) -> None:
    table = pq.read_table(run / "scores.parquet")
    best = lp.argmax(axis=1)
    cols = {"letter_logprobs": pa.array(lp.tolist(), type=table.schema.field("letter_logprobs").type),
            "letter_mass": pa.array(np.exp(lp.astype(np.float64)).sum(axis=1)),
            "greedy_letter": pa.array(["ABCD"[b] for b in best]), "greedy_valid": pa.array(np.ones(len(lp), bool))}
    for name, column in cols.items():
        table = table.set_column(table.schema.get_field_index(name), name, column)
    pq.write_table(table, run / "scores.parquet")


def inside(point: Any, interval: Any) -> bool:
    """Every number of `point` inside its twin in `interval`."""
    if isinstance(interval, dict):
        return all(inside((point or {}).get(k), v) for k, v in interval.items())
    if isinstance(interval, list) and len(interval) == 2 and not isinstance(interval[0], list):
        lo, hi = interval
        if not isinstance(point, (int, float)) or lo is None or not np.isfinite(point) or not np.isfinite(lo):
            return True
        return lo <= point <= hi
    if isinstance(interval, list):
        return all(inside(p, v) for p, v in zip(point or [None] * len(interval), interval))
    return True


def in_short(report: str) -> str:
    return next(line for line in report.splitlines() if line.startswith("**In short:**"))


def factor_null(work: Path, replicates: int) -> None:
    """A factor run (`factors=[labels]`) in the null world (no culture × wording term: every
    wording draws from the same world): how often *In short* states the headline's spread."""
    base = base_run(work, "labels")
    d = prompt_design(base)
    rng, said = np.random.default_rng(9), 0
    for r in range(replicates):
        run = work / f"factor-{r}"
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(base, run)
        replace_scores(run, draw_logprobs(WORLDS["null"], d, rng))
        analyze_run(run)
        said += "over the wordings" in in_short((run / "report.md").read_text())
        shutil.rmtree(run)
    print(f"factor run, null world: the spread sentence in {said} of {replicates}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--factor", action="store_true", help="the factor run's null world only")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="headline-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.factor:
        factor_null(work, args.replicates)
        return
    base = base_run(work)
    d = prompt_design(base)
    for name, world in WORLDS.items():
        truth = float(kl_to_uniform(population_shares(world))) if world.preference else 0.0
        tally = {"inside": 0, "covers": 0, "rejects": 0, "names": 0}
        rng = np.random.default_rng(7 if name == "null" else 8)
        for r in range(args.replicates):
            run = work / f"{name}-{r}"
            shutil.rmtree(run, ignore_errors=True)
            shutil.copytree(base, run)
            replace_scores(run, draw_logprobs(world, d, rng))
            m = analyze_run(run)
            lo, hi = m["ci95"]["expected"]["C0"]["KL"]
            tally["inside"] += all(inside(m.get(k), m["ci95"].get(k)) for k in ("expected", "debiased"))
            tally["covers"] += lo <= truth <= hi
            tally["rejects"] += m["p"]["expected"]["C0"]["KL"] < 0.05
            tally["names"] += any(c in in_short((run / "report.md").read_text()) for c in CULTURES)
            shutil.rmtree(run)
        print(f"{name}: population KL {truth:.4f}; of {args.replicates}: " + ", ".join(f"{k} {v}" for k, v in tally.items()),
              flush=True)


if __name__ == "__main__":
    main()
