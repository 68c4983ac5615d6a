"""The lines a run prints at its end: headline metrics with intervals, then warnings."""

from __future__ import annotations

from probe.benches.registry import get_task
from probe.report.summary import run_summary


def test_disco_summary_and_warnings() -> None:
    metrics = {"bench": "demo", "model": "m", "n_items": 2, "n_prompts": 104,
               "letter_mass": {"mean": 0.2, "share_below_half": 0.9}, "greedy_valid_rate": 0.25,
               "expected": {"C0": {"KL": 0.12, "SPD": float("nan")}}, "greedy": {"C3": {"CSC": 0.5}},
               "ci95": {"expected": {"C0": {"KL": [0.1, 0.15]}}, "greedy": {"C3": {"CSC": [0.25, 0.75]}}}}
    text = run_summary(get_task("disco"), metrics).splitlines()
    assert text[0] == "DiSCo, m on demo: 2 items, 104 prompts"
    assert text[1:3] == ["  KL: 0.120 [0.100, 0.150]", "  CSC (greedy): 0.500 [0.250, 0.750]"]
    assert text[3].startswith("  warning: mean letter mass 0.20 < 0.5") and "25% of prompts" in text[3]
    assert len(text) == 4  # NaN and absent metrics are left out, not printed as "nan"


def test_generation_and_judge_warnings() -> None:
    metrics = {"bench": "ccd", "model": "m", "n_items": 3, "n_prompts": 30, "n_invalid": 3, "invalid_rate": 0.1,
               "expected": {"entropy_bits": 3.0}, "ci95": {}, "pluralism": {"n_judge_errors": 2}}
    text = run_summary(get_task("ccd"), metrics)
    assert "warning: 3 of 30 generations had no valid answer (10.0%)" in text
    assert "warning: 2 judge verdicts failed" in text and "letter mass" not in text
