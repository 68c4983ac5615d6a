"""OpinionQA's naming rule and survey intervals on planted worlds (numbers on docs/benchmarks/opinionqa.md).

    .venv/bin/python scripts/calibrate_opinionqa.py            # ~1 min on one core
"""

from __future__ import annotations

from probe.benches.opinionqa.calibration import false_naming_rate, survey_coverage


def main() -> None:
    print("naming: false names with every group equally close (6 groups, 1,000 worlds)")
    for questions in (10, 20, 40, 100):
        print(f"  {questions:>3} questions: {false_naming_rate(1000, 0.0, 5, questions=questions):.3f}")
    print("naming: group 0 named closest when planted closer (40 questions, 300 worlds)")
    for shift in (0.01, 0.02, 0.05):
        print(f"  +{shift}: {false_naming_rate(300, shift, 6):.3f}")
    print("survey intervals, survey error alone (40 questions, 400 worlds): reflected vs plain percentile")
    for n in (20, 100, 1000, 4000):
        print(f"  {n:>4} respondents: {survey_coverage(400, n, 7, items=False):.3f} vs "
              f"{survey_coverage(400, n, 7, items=False, basic=False):.3f}")
    print("survey intervals, questions resampled too (400 worlds)")
    for n in (20, 4000):
        print(f"  {n:>4} respondents: {survey_coverage(400, n, 8):.3f}")


if __name__ == "__main__":
    main()
