"""What a report and an end-of-run line show, checked on planted metrics: every π column, the
*Terms* paragraph cut to the terms the report uses, captions rendered as markdown, markdown made
plain for a terminal, GlobalOpinionQA's lift figure, its extremes and its near-uniform caveat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from probe.benches.disco.conclusion import _terms
from probe.benches.disco.conclusion import TERMS as DISCO_TERMS
from probe.benches.globalopinion import figures as goqa_figures
from probe.benches.globalopinion.task import TASK as GOQA
from probe.benches.globalopinion.task import _top
from probe.report.summary import caveat, run_summary
from probe.viz.figures import Figure
from probe.viz.html import caption_html, render_html
from probe.viz.letters import letter_section
from probe.viz.plain import plain_text
from probe.viz.terms import used_terms_only


def test_every_letter_any_condition_shows_has_its_prior_column() -> None:
    priors = {"K=2": {"A": 0.3, "B": 0.7}, "K=4": {"A": 0.1, "B": 0.2, "C": 0.3, "D": 0.4}}
    text = letter_section({"letter_prior": priors, "ci95": {}}, "Reading.", {})
    head = next(line for line in text.split("\n") if line.startswith("| condition |"))
    assert [c.strip() for c in head.split("|")[2:6]] == [f"π({x}) [95% CI]" for x in "ABCD"]
    k2 = next(line for line in text.split("\n") if line.startswith("| K=2 |")).split(" | ")
    mark = k2[3].removeprefix("–")
    assert k2[3:5] == [f"–{mark}"] * 2 and f"{mark} no such letter: this condition's questions have fewer options" in text
    k4 = next(line for line in text.split("\n") if line.startswith("| K=4 |")).split(" | ")
    assert k4[3].startswith("0.300") and k4[4].startswith("0.400")


REPORT = """# Title

**In short:** the KL is small; the CR is 0.25.

**Terms:** C0–C3 = the four conditions; KL = a divergence (0 = even); K = options; CR = compliance rate; \
SPD = parity (SPD_compliance: on CR); lift = similarity − uniform; countries are ranked by it; π = the prior.

| condition | π(A) | SPD_compliance |
|---|---|---|
| C0 | 0.2 | 0.1 |
"""


def test_terms_lists_only_the_terms_the_report_uses() -> None:
    cut = used_terms_only(REPORT)
    terms = next(p for p in cut.split("\n\n") if p.startswith("**Terms:**"))
    # C0–C3 by its part C0; SPD by SPD_compliance; π by π(A); K is not used by KL; lift's meaning keeps its `;`
    assert terms == ("**Terms:** C0–C3 = the four conditions; KL = a divergence (0 = even); CR = compliance rate; "
                     "SPD = parity (SPD_compliance: on CR); π = the prior.")
    assert cut.replace(terms, "") == REPORT.replace(REPORT.split("\n\n")[2], "")
    assert "**Terms:**" not in used_terms_only("# T\n\n**Terms:** XYZ = unused.\n\nbody")
    assert used_terms_only("# no terms\n\nbody") == "# no terms\n\nbody"


def test_a_c0_run_is_taught_only_its_condition() -> None:
    assert _terms({"expected": {"C0": {}}})[0] == ("C0", "the condition of this run: C0 no context")
    assert _terms({"expected": {"C0": {}, "C2": {}}})[0][0] == "C0, C2"
    assert _terms({"expected": {c: {} for c in ("C0", "C1", "C2", "C3")}}) == DISCO_TERMS


def test_captions_are_rendered_not_escaped(tmp_path: Path) -> None:
    assert caption_html("by its `labels` level, *not* <b>bold</b> & more") == (
        "by its <code>labels</code> level, <em>not</em> &lt;b&gt;bold&lt;/b&gt; &amp; more")
    png = tmp_path / "f.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    page = render_html("t", "# t", [Figure("f.png", png, "coloured by its `labels` level")])
    assert "<figcaption>coloured by its <code>labels</code> level</figcaption>" in page and "`" not in page


def test_markdown_made_plain_for_a_terminal() -> None:
    md = ("A = x  \n**Warning:** only `2` items\n\n| metric | a \\| b |\n|---|---|\n| C0.KL | 1.5 |\n"
          "### Variant v\n")
    assert plain_text(md) == "A = x\nWarning: only 2 items\n\nmetric  a | b\nC0.KL   1.5\nVariant v:\n"


def _ranked(lifts: dict[str, float]) -> dict[str, Any]:
    return {"expected": {"default": {"lift": lifts}}, "ranking": {"ranked": list(lifts)}}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_no_country_is_named_at_both_ends(n: int) -> None:
    lifts = {f"Country{i}": 0.1 - 0.01 * i for i in range(n)}
    high = [c.split()[0] for c in _top(_ranked(lifts)).split(", ")]
    low = _top(_ranked(lifts), furthest=True)
    low = [] if low == "–" else [c.split()[0] for c in low.split(", ")]
    assert not set(high) & set(low)
    assert high == [f"Country{i}" for i in range(min(3, (n + 1) // 2))]
    assert low == [f"Country{n - 1 - i}" for i in range(min(3, n // 2))]


def test_the_near_uniform_caveat_reaches_the_summary_and_probe_runs() -> None:
    m = {"model": "m", "bench": "b", "n_items": 30, "n_prompts": 300, "near_uniform": True, "model_entropy": 0.9861}
    summary = run_summary(GOQA, m)
    assert "  warning: near-uniform model (mean normalised entropy 0.986, 1 = uniform): read the lifts, not the " \
           "ranking" in summary.split("\n")
    assert caveat(m, 0, GOQA.presentation.caveats(m)) == "near-uniform"
    assert GOQA.presentation.caveats({**m, "near_uniform": False}) == []


def test_the_country_figure_plots_lift_with_its_interval(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Bars are the planted lifts with their intervals, the markers the similarity and the uniform
    model's on the second axis, and the legend overlaps no bar (it sits outside the axes)."""
    kept: dict[str, Any] = {}

    def keep(fig: Any, out_dir: Path, name: str, caption: str) -> Figure:
        kept["fig"] = fig
        return Figure(name, out_dir / name, caption)

    monkeypatch.setattr(goqa_figures, "save", keep)
    lift = {"France": 0.05, "Kenya": -0.02, "Japan": 0.01}
    sim = {"France": 0.65, "Kenya": 0.40, "Japan": 0.55}
    uni = {c: sim[c] - lift[c] for c in lift}
    m = {"model": "m", "bench": "b", "expected": {"default": {"lift": lift, "similarity": sim, "uniform": uni}},
         "ci95": {"expected": {"default": {"lift": {c: [v - 0.01, v + 0.02] for c, v in lift.items()}}}}}
    (fig_record,) = goqa_figures.run_figures(type("R", (), {"metrics": m})(), tmp_path)
    assert fig_record.name == "country_lift.png" and "lift" in fig_record.caption
    fig = kept["fig"]
    ax, right = fig.axes
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([0.05, 0.01, -0.02])  # ordered by lift
    dots, ticks = (c.get_offsets()[:, 1] for c in right.collections)
    assert list(dots) == pytest.approx([0.65, 0.55, 0.40]) and list(ticks) == pytest.approx([0.60, 0.54, 0.42])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    assert not legend.overlaps(ax.get_window_extent(renderer))
    low = [seg for c in ax.collections for seg in c.get_segments()]  # the interval whiskers
    assert sorted(round(float(s[0][1]), 6) for s in low) == sorted(round(v - 0.01, 6) for v in lift.values())
    assert np.isclose(sorted(float(s[1][1]) for s in low), sorted(v + 0.02 for v in lift.values())).all()


def test_the_greedy_pick_is_among_the_letters_a_prompt_shows() -> None:
    """A 2-option prompt in a run whose widest item has 4 options: the stored log-probs at C and D
    (letters the prompt does not show) are the largest, yet its pick is A or B, as in its metrics."""
    import pyarrow as pa

    from probe.results.samples import sample_frame

    letters = ["A", "B", "C", "D"]
    prompts = pa.table({"prompt_id": [0, 1], "text": ["two options", "four options"],
                        "order": [[0, 1, -1, -1], [0, 1, 2, 3]], "groups": [["x", "y", None, None], list("wxyz")]})
    lp = [[-3.0, -2.0, -0.5, -0.1], [-3.0, -2.0, -0.5, -0.1]]
    scores = pa.table({"prompt_id": [0, 1], "letter_logprobs": lp, "letter_mass": [0.1, 0.1],
                       "greedy_letter": ["D", "D"], "greedy_valid": [True, True]})
    frame = sample_frame(prompts, letters, 1.0, scores)
    assert frame["greedy_letter"].tolist() == ["B", "D"] and frame["greedy_group"].tolist() == ["y", "z"]
    assert frame.loc[0, "p_C"] == 0.0 and frame.loc[0, "p_B"] == pytest.approx(1 / (1 + np.exp(-1.0)))
