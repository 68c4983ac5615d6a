"""`probe view`: the sample browser renders in headless Chromium, every filter narrows the
listed prompts to a hand-counted number, and texts stay text; runs link it from report.html."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import disco_rows, run_probe, write_csv

from probe.commands.view import main
from probe.types import Design
from probe.viz.samples import SampleSet, write_samples_html

REPO_ROOT = Path(__file__).resolve().parents[2]
FILTERS = ("bench", "condition", "group", "verdict", "mass_min", "mass_max")
INJECTED = '</script><b id="injected">x</b>'
LETTER_DESIGN = Design(condition="condition", target="target")
"""The letter run's design: which of its columns the page shows as the condition and the cue's target."""


def _dom(page: Path, fragment: str, tmp_path: Path) -> str:
    """The page's DOM after its script ran, opened at `#fragment`."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium not installed (CI installs Debian's chromium)")
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                           f"{page.resolve().as_uri()}#{fragment}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-ready="1"' in proc.stdout, proc.stdout[-1500:]
    return proc.stdout


def _listed(dom: str) -> tuple[int, int]:
    """(`data-matching` on body, number of listed sample rows); they must agree with data-shown."""
    matching = int(re.search(r'data-matching="(\d+)"', dom).group(1))
    shown = int(re.search(r'data-shown="(\d+)"', dom).group(1))
    rows = len(re.findall(r'<tr class="sample', dom))
    assert rows == shown, (rows, shown)
    return matching, rows


def _letter_run() -> pd.DataFrame:
    return pd.DataFrame({
        "prompt_id": [0, 1, 2, 3], "item_id": ["i0", "i0", "i1", "i1"], "condition": ["C0", "C0", "C1", "C1"],
        "target": [None, None, "Greece", "Spain"],
        "prompt": ["Pick one", "Pick again", "In Greece, pick", f"Spain {INJECTED}"],
        "group_A": ["Assam", "China", "Greece", "Spain"], "group_B": ["China", "Assam", "China", "Greece"],
        "p_A": [0.9, 0.3, 0.7, 0.4], "p_B": [0.1, 0.7, 0.3, 0.6], "letter_mass": [0.9, 0.2, 0.6, 0.05],
        "greedy_letter": ["A", "B", "A", "B"], "greedy_group": ["Assam", "Assam", "Greece", "Greece"],
        "greedy_valid": [True, False, True, False], "argmax_token_id": [65, 12, 65, 7],
        "argmax_token": ["A", " The", "A", "\n"], "argmax_prob": [0.81, 0.5, 0.42, 0.9]})


def _open_run() -> pd.DataFrame:
    return pd.DataFrame({
        "prompt_id": [0, 1], "template": ["first workday?"] * 2, "language": ["French", "German"],
        "prompt": ["Quel jour ?", "Welcher Tag?"], "generation": ["Lundi", "Montag, wie in den USA"],
        "answer": ["Lundi", "Montag"], "implicit.mentioned_answers": [[], ["Montag"]],
        "implicit.framing_style": ["NEUTRAL", "US_COMPARISON"], "implicit.judge_error": [None, None]})


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view") / "samples.html"
    return write_samples_html(out, "probe samples <test>", [
        SampleSet("letters-run", "alpha", "tiny", ("A", "B"), _letter_run(), design=LETTER_DESIGN),
        SampleSet("open-run", "beta", "tiny", (), _open_run(), facets=("template", "language"))])


@pytest.mark.slow
@pytest.mark.parametrize(("fragment", "expected"), [
    ("", 6),
    ("bench=alpha", 4), ("bench=beta", 2),
    ("condition=C0", 2),
    ("group=Assam", 2), ("group=Greece", 2), ("group=Spain", 1),  # shown at a letter, or the target
    ("verdict=argmax%20is%20not%20a%20letter", 2),
    ("verdict=implicit.framing_style%3A%20NEUTRAL", 1),
    ("verdict=implicit.mentioned_answers%3A%20Montag", 1),
    ("verdict=(no%20verdict)", 2),
    ("mass_min=0.5", 2), ("mass_max=0.1", 1),  # open answers have no letter mass
    ("language=French", 1),
    ("condition=C1&group=Greece&mass_min=0.5", 1),
])
def test_every_filter_lists_the_hand_counted_prompts(page: Path, tmp_path: Path, fragment: str, expected: int) -> None:
    dom = _dom(page, fragment, tmp_path)
    for name in (*FILTERS, "run", "language"):
        assert f'id="f-{name}"' in dom, name
    assert 'data-rows="6"' in dom
    assert _listed(dom) == (expected, expected)


@pytest.mark.slow
def test_a_prompt_is_shown_beside_its_probabilities_answer_and_verdicts(page: Path, tmp_path: Path) -> None:
    dom = _dom(page, "sel=0:3", tmp_path)
    detail = dom[dom.index('id="detail"'):]
    assert "letters-run — prompt 3 (alpha, tiny)" in detail
    assert "Spain &lt;/script&gt;&lt;b id=\"injected\"&gt;x&lt;/b&gt;" in detail  # data, never markup
    assert 'id="injected"' not in dom.replace('&lt;b id="injected"&gt;', "")
    assert re.search(r"<td>B</td><td>Greece</td><td class=\"num\">–</td><td class=\"num\">0\.600</td>", detail)
    assert '"\\n" (id 7), p = 0.900; not a letter' in detail
    dom = _dom(page, "sel=1:1", tmp_path)
    detail = dom[dom.index('id="detail"'):]
    assert "<pre>Montag, wie in den USA</pre>" in detail
    assert "<th>implicit.framing_style</th><td>US_COMPARISON</td>" in detail


@pytest.mark.slow
def test_long_runs_are_listed_a_page_at_a_time(tmp_path: Path) -> None:
    frame = pd.concat([_letter_run()] * 300, ignore_index=True).assign(prompt_id=range(1200))
    page = write_samples_html(tmp_path / "samples.html", "long", [SampleSet("r", "alpha", "tiny", ("A", "B"), frame, design=LETTER_DESIGN)])
    dom = _dom(page, "condition=C0", tmp_path)
    assert _listed(dom) == (600, 500) and "show 100 more" in dom


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-item DiSCo run of the tiny model: 104 prompts, item 0 shows Algeria, Assam, China,
    Ethiopia and item 1 Assam, China, Ethiopia, Greece (conftest.disco_rows)."""
    tmp = tmp_path_factory.mktemp("viewrun")
    csv_path = write_csv(tmp / "disco.csv", disco_rows(2))
    env = {**os.environ, "PROBE_CACHE": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=disco", f"bench.path={csv_path}",
                           f"hydra.run.dir={tmp / 'sweep' / 'run'}", "analysis.n_boot=20", "progress=false"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "sweep" / "run"


@pytest.mark.slow
def test_every_run_writes_its_browser_and_links_it_from_the_report(tiny_run: Path, tmp_path: Path) -> None:
    assert '<a href="samples.html">' in (tiny_run / "report.html").read_text()
    dom = _dom(tiny_run / "samples.html", "condition=C0&group=Algeria", tmp_path)
    assert 'data-rows="104"' in dom and _listed(dom) == (4, 4)  # item 0's four C0 orderings


@pytest.mark.slow
def test_probe_view_over_a_sweep_directory(tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tiny_run.parent
    (sweep / "unfinished").mkdir(exist_ok=True)
    (sweep / "unfinished" / "manifest.json").write_text("{}")
    main([str(sweep), f"out={tmp_path / 'out'}"])
    printed = capsys.readouterr().out
    assert f"skipped {sweep / 'unfinished'} (unfinished: no DONE)" in printed
    dom = _dom(tmp_path / "out" / "samples.html", "group=Greece", tmp_path)
    assert _listed(dom) == (52, 52)  # every prompt of item 1
    assert "<td>run</td>" in dom


def test_probe_view_input_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in (([str(tmp_path / "nowhere")], f"{tmp_path / 'nowhere'}: no such directory"),
                          ([str(tmp_path), "colour=red"], "unknown option(s) ['colour']; valid: ['out']"),
                          ([str(tmp_path)], "no finished probe runs (with DONE)")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("probe: error: ") and message in err and err.count("\n") == 1


def _factor_run() -> pd.DataFrame:
    """Two variants of one prompt: the protocol's letters, then `labels=digits` (1 2 shown)."""
    return pd.DataFrame({
        "prompt_id": [0, 1, 2], "condition": ["C0", "C0", "C0"], "prompt": ["A. x\nB. y", "1. x\n2. y", "1. y\n2. x"],
        "variant": [0, 1, 1], "variant_name": ["protocol", "labels=digits", "labels=digits"],
        "variant_levels": [{"labels": "protocol"}, {"labels": "digits"}, {"labels": "digits"}],
        "label_A": ["A", "1", "1"], "label_B": ["B", "2", "2"],
        "group_A": ["Assam", "Assam", "China"], "group_B": ["China", "China", "Assam"],
        "p_A": [0.2, 0.7, 0.4], "p_B": [0.8, 0.3, 0.6], "greedy_letter": ["B", "A", "B"],
        "greedy_group": ["China", "Assam", "Assam"], "letter_mass": [0.9, 0.9, 0.9]})


def _structured_run() -> pd.DataFrame:
    """A bench with a JSON-object field (answer shares per country), on the first prompt only."""
    return pd.DataFrame({"prompt_id": [0, 1, 2], "condition": ["default"] * 3, "prompt": ["q0", "q0'", "q1"],
                         "human": ['{"Nigeria": [0.25, 0.75], "India (Current national sample)": [0.5, 0.5]}',
                                   None, '{"Nigeria": [1.0, 0.0]}'],
                         "group_A": ["x", "y", "x"], "group_B": ["y", "x", "y"],
                         "p_A": [0.5, 0.5, 0.5], "p_B": [0.5, 0.5, 0.5], "greedy_letter": ["A", "A", "A"]})


@pytest.fixture(scope="module")
def factor_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("factor-view") / "samples.html"
    return write_samples_html(out, "factor", [
        SampleSet("factor-run", "demo", "tiny", ("A", "B"), _factor_run(), design=Design(condition="condition")),
        SampleSet("opinion-run", "globalopinion", "tiny", ("A", "B"), _structured_run(),
                  design=Design(condition="condition", structured=("human",)))])


@pytest.mark.parametrize(("fragment", "expected"), [
    ("", 6), ("variant=1", 2), ("variant=0", 1), ("variant=7", 6),  # a variant not in the runs: no filter
    ("human=Nigeria", 2), ("human=India%20(Current%20national%20sample)", 1),
])
def test_variants_and_object_keys_filter_to_hand_counted_prompts(factor_page: Path, tmp_path: Path, fragment: str,
                                                                  expected: int) -> None:
    dom = _dom(factor_page, fragment, tmp_path)
    assert 'id="f-variant"' in dom and 'id="f-human"' in dom
    assert "1 · labels=digits</option>" in dom
    assert 'id="f-human"' in dom and '"{&quot;Nigeria' not in dom  # the shares are no raw-JSON dropdown
    assert _listed(dom) == (expected, expected)


def test_a_variant_prompt_shows_its_own_labels_and_an_object_field_as_a_table(factor_page: Path,
                                                                              tmp_path: Path) -> None:
    dom = _dom(factor_page, "sel=0:2", tmp_path)
    detail = dom[dom.index('id="detail"'):]
    assert re.search(r"<td>1 \(A\)</td><td>China</td>.*?0\.400", detail)  # label shown, its letter position
    assert "<th>pick</th><td>2 (Assam)</td>" in detail
    assert "<th>variant</th><td>1 · labels=digits</td><th>levels</th>" not in detail  # one row each
    assert "<th>variant</th><td>1 · labels=digits</td></tr><tr><th>levels</th><td>labels=digits</td>" in detail
    listed = dom[dom.index('id="list"'):dom.index('id="detail"')]
    assert "<th>variant</th>" in listed and "<td>2 · Assam</td>" in listed
    dom = _dom(factor_page, "sel=1:0", tmp_path)
    detail = dom[dom.index('id="detail"'):]
    assert "<h3>human</h3>" in detail and "<th>Nigeria</th><td>0.250 · 0.750</td>" in detail
