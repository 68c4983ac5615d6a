"""Prompt factors in a run (`factors=…`): a factorial's variants are each exactly a standalone
run of that variant (letter log-probs within 1e-5 nats), a run without factors stores nothing
new, every factor changes what it should in the rendered prompt, the top-level metrics are the
protocol's, `format` in metrics.json is the format-robustness analysis (recomputed by
`probe analyze`), and bad designs stop before anything is written."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import ccd_items, write_json_file
from test_globalopinion_data import row, write
from test_text_runs import _config

from probe.errors import ProbeInputError
from probe.pipeline.analysis import analyze_run
from probe.pipeline.execute import run
from probe.pipeline.spec import run_config
from probe.prompts.factors import FactorError

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

TOL = 1e-5  # nats: a variant's letter log-probs do not depend on the other variants in the plan
BASE = ("bench.limit=2", "bench.conditions=[C0]")
FACTORIAL = "factors=[labels,cue,instruction]"
SOLO = ("factors=[{labels: digits, cue: bare, instruction: which}, {labels: lower, cue: answer, instruction: pick},"
        " {layout: paren, system: neutral}]")


REWORDED = "factors=[{labels: lower, instruction: pick}, {layout: paren}]"


def _run(out: Path, *overrides: str, bench: str = "demo") -> Path:
    return run(run_config(_config(*(BASE if bench == "demo" else BASE[:1]), *overrides, bench=bench), out))


def _opinions(tmp: Path) -> Path:
    """Two questions: 2 options, and 11 (the widest: labels 1 … 11 under `digits`)."""
    eleven = [f"Choice {i}" for i in range(11)]
    shares = DD_SHARES.format([round(1 / 11, 6)] * 10 + [round(1 - 10 * round(1 / 11, 6), 6)])
    return write(tmp, [row(), row("Which one?", shares, repr(eleven))])


DD_SHARES = "defaultdict(<class 'list'>, {{'France': {0}}})"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("factor_runs")
    os.environ["PROBE_CACHE"] = str(tmp / "cache")
    ccd = f"bench.path={write_json_file(tmp / 'CCD-Bench.json', ccd_items(1))}"
    opinions = f"bench.path={_opinions(tmp)}"
    return {"plain": _run(tmp / "plain"), "factorial": _run(tmp / "factorial", FACTORIAL),
            "solo": _run(tmp / "solo", SOLO), "ccd": _run(tmp / "ccd", ccd, REWORDED, bench="ccd"),
            "opinions": _run(tmp / "opinions", opinions, "bench.conditions=[default]", REWORDED,
                             bench="globalopinion"),
            "ccd_data": tmp / "CCD-Bench.json", "opinions_data": tmp / "global_opinions.csv"}


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _variants(out: Path) -> dict[tuple[tuple[str, str], ...], dict[str, Any]]:
    """`{levels (every factor, protocol filled in): variant record}` of a factor run."""
    every = ("labels", "layout", "cue", "instruction", "system")
    out_map = {}
    for rec in _json(out / "manifest.json")["variants"]:
        levels = {f: ("none" if f == "system" else "protocol") for f in every} | rec["levels"]
        out_map[tuple(sorted(levels.items()))] = rec
    return out_map


def _letters(out: Path, index: int | None) -> np.ndarray:
    """`[prompt, letter]` stored log-probs of one variant (None: every prompt), in prompt order."""
    scores = pq.read_table(out / "scores.parquet").to_pydict()
    prompts = pq.read_table(out / "prompts.parquet").to_pydict()
    keep = [True] * len(prompts["prompt_id"]) if index is None else [v == index for v in prompts["variant"]]
    rows = [lp for lp, k in zip(scores["letter_logprobs"], keep) if k]
    return np.asarray(rows, dtype=np.float64)


def test_each_variant_equals_its_standalone_run(runs: dict[str, Path]) -> None:
    """Every variant of the standalone runs (the protocol alone, and three explicit variants)
    has the letter log-probs of the same variant inside the 36-variant factorial within 1e-5
    nats, prompt by prompt, and reads its own labels' tokens."""
    factorial = _variants(runs["factorial"])
    assert len(factorial) == 3 * 3 * 4
    worst = float(np.abs(_letters(runs["plain"], None) - _letters(runs["factorial"], 0)).max())
    compared = 1
    for levels, rec in _variants(runs["solo"]).items():
        if levels not in factorial:  # layout / system: not varied by the factorial
            continue
        mine, theirs = _letters(runs["solo"], rec["index"]), _letters(runs["factorial"], factorial[levels]["index"])
        assert mine.shape == theirs.shape == (8, 4)
        assert rec["label_token_ids"] == factorial[levels]["label_token_ids"]
        worst = max(worst, float(np.abs(mine - theirs).max()))
        compared += 1
    assert compared == 4 and worst <= TOL, worst  # the plain run, and the solo run's protocol and two others


def test_a_run_without_factors_stores_nothing_new(runs: dict[str, Path]) -> None:
    """No `variant` column, no `variants` in the manifest or run key, no `format` in metrics.json."""
    plain = runs["plain"]
    assert "variant" not in pq.read_table(plain / "prompts.parquet").column_names
    assert "variants" not in _json(plain / "manifest.json") and "variants" not in _json(plain / "run_key.json")
    assert "format" not in _json(plain / "metrics.json")


def test_each_factor_changes_what_it_should(runs: dict[str, Path]) -> None:
    """Labels, instruction, cue, layout and system message each show in the rendered text; the
    protocol's variant renders as the plain run; the manifest records each variant's labels."""
    solo = pq.read_table(runs["solo"] / "prompts.parquet").to_pydict()
    plain = pq.read_table(runs["plain"] / "prompts.parquet").to_pydict()
    text = {v: t for v, t in zip(solo["variant"], solo["text"])}  # one prompt of each variant
    assert solo["text"][:8] == plain["text"] and solo["token_ids"][:8] == plain["token_ids"]
    assert "\n1. " in text[1] and "Give just the label of that option (1, 2, 3, 4)" in text[1]
    assert text[1].rstrip().endswith("assistant")  # the bare generation prompt: nothing pre-filled
    assert "\na. " in text[2] and text[2].endswith("Answer:") and "one of a, b, c, d" in text[2]
    assert "\n(A) " in text[3] and "You are a helpful assistant." in text[3]
    records = _json(runs["solo"] / "manifest.json")["variants"]
    assert [r["labels"] for r in records] == [list("ABCD"), list("1234"), list("abcd"), list("ABCD")]
    assert [r["cue"] for r in records][1:3] == ["", "Answer:"]


def test_top_level_metrics_are_the_protocols(runs: dict[str, Path]) -> None:
    """A factor run's metrics outside `format` are the protocol variant's: the plain run's, to
    within the parity tolerance (same prompts, items and bootstrap seed)."""
    plain, factorial = _json(runs["plain"] / "metrics.json"), _json(runs["factorial"] / "metrics.json")
    assert factorial["n_prompts"] == plain["n_prompts"] == 8
    a, b = plain["expected"]["C0"]["CSD"], factorial["expected"]["C0"]["CSD"]
    assert a.keys() == b.keys() and all(abs(a[k] - b[k]) < 1e-4 for k in a)
    assert factorial["format"]["variants"][0]["expected"]["C0"]["CSD"] == b


def test_format_block_and_its_recomputation(runs: dict[str, Path], tmp_path: Path) -> None:
    """`format`: 36 variants with their levels, shares per variant summing to 1, the variance
    split adding to 1 over group, each factor and the rest, verdicts for every group; `probe
    analyze` on a copy of the run writes the same block."""
    block = _json(runs["factorial"] / "metrics.json")["format"]
    assert block["factors"] == ["labels", "cue", "instruction"] and len(block["variants"]) == 36
    assert block["condition"] == "C0"
    for shares in block["shares"].values():
        assert abs(sum(shares.values()) - 1) < 1e-9
    split = block["split"]
    assert abs(split["group"] + sum(split["interactions"].values()) + split["rest"] - 1) < 1e-9
    assert sum(block["verdict_counts"].values()) == len(block["groups"]) == len(block["across"])
    cost = block["cost"]  # the trie shares what variants share: within 1% of its limit, far below 36 × one
    assert cost["tokens_computed"] <= 1.01 * cost["trie_limit"] and cost["per_variant_vs_protocol"] < 0.5
    copy = shutil.copytree(runs["factorial"], tmp_path / "copy")
    (copy / "metrics.json").unlink()
    analyze_run(copy)
    assert _json(copy / "metrics.json")["format"] == block
    # `analysis.min_letter_mass=0` keeps every variant the default threshold leaves out (the tiny
    # model puts little mass on the letters), written beside the run's own metrics
    zero = analyze_run(copy, {"min_letter_mass": 0.0})["format"]
    assert not any(v["valid"] for v in block["variants"]) and all(v["valid"] for v in zero["variants"])
    assert zero["validity"] == {"min_letter_mass": 0.0, "excluded": [], "all_below": False}
    assert (copy / "metrics-min_letter_mass=0.0.json").is_file()


def test_each_variants_letter_prior(runs: dict[str, Path]) -> None:
    """Every variant of `format` carries its letter prior and letter split: the protocol's is the
    run's own (the top-level blocks, read from the same prompts), another variant's is the same
    variant's in a standalone run (within what the log-prob parity allows); the report tabulates
    them at the analysed condition, one row per variant with its labels."""
    metrics = _json(runs["factorial"] / "metrics.json")
    variants = metrics["format"]["variants"]
    assert variants[0]["letter_prior"] == metrics["letter_prior"]
    assert variants[0]["letter_split"] == metrics["letter_split"]
    solo = {v["name"]: v for v in _json(runs["solo"] / "metrics.json")["format"]["variants"]}
    compared = 0
    for v in variants:
        if v["name"] in solo:
            mine, theirs = v["letter_prior"]["C0"], solo[v["name"]]["letter_prior"]["C0"]
            assert mine.keys() == theirs.keys() and all(abs(mine[k] - theirs[k]) < 1e-4 for k in mine)
            assert abs(sum(mine.values()) - 1) < 1e-9
            compared += 1
    assert compared >= 2
    report = (runs["factorial"] / "report.md").read_text()
    table = report[report.index("Letter prior per wording in condition `C0`"):].split("\n")
    assert table[2] == "| variant | labels | P(label 1) | P(label 2) | P(label 3) | P(label 4) | letter share |"
    rows = [line for line in table[4:40] if line.startswith("| ")]
    assert len(rows) == 36
    digits = next(v for v in variants if v["levels"]["labels"] == "digits")
    prior = digits["letter_prior"]["C0"]
    assert f"| {digits['name']} | 1 2 3 4 | " + " | ".join(f"{x:.3f}" for x in prior.values()) in report


def test_shards_of_a_factor_run_merge_into_the_unsharded_run(runs: dict[str, Path], tmp_path: Path) -> None:
    """`bench.shard=i/n` of a factor run: each shard holds every variant of its items, and the
    merge holds the unsharded run's prompts (the `variant` column), scores bit for bit, its
    variants and its `format` block."""
    from probe.pipeline.shard_merge import merge_shards

    shards = [_run(tmp_path / f"s{i}", FACTORIAL, f"bench.shard={i}/2") for i in range(2)]
    for shard in shards:  # whole items: all 36 variants of one item each
        prompts = pq.read_table(shard / "prompts.parquet").to_pydict()
        assert len(set(prompts["item_id"])) == 1 and len(set(prompts["variant"])) == 36
    merged = merge_shards(shards, tmp_path / "merged")
    whole = runs["factorial"]
    for name in ("prompts.parquet", "scores.parquet"):
        assert pq.read_table(merged / name).equals(pq.read_table(whole / name)), name
    assert _json(merged / "manifest.json")["variants"] == _json(whole / "manifest.json")["variants"]
    assert _json(merged / "metrics.json")["format"] == {
        **_json(whole / "metrics.json")["format"], "cost": _json(merged / "metrics.json")["format"]["cost"]}


def _levels_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "levels.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(("overrides", "bench", "message"), [
    (("factors=[labels,colour]",), "demo", "unknown factor 'colour'"),
    (("factors=[{labels: roman}]",), "demo", "factor 'labels' has no level 'roman'"),
    (("factors=[labels,cue,instruction,layout,system]", "max_variants=100"), "demo", "144 variants"),
    (("factors=[cue]", "backend.mode=generate"), "demo", "need letter scoring"),
    (("factors=[cue]", "intervention=steer", "intervention.group=China"), "demo", "without an intervention"),
])
def test_bad_designs_stop_before_anything_runs(overrides: tuple[str, ...], bench: str, message: str,
                                               tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match=message):
        _run(tmp_path / "out", *overrides, bench=bench)
    assert not (tmp_path / "out").exists()


def test_a_levels_file_level_without_its_placeholder_is_refused(tmp_path: Path) -> None:
    path = _levels_file(tmp_path, "instruction:\n  terse: Answer with one label only.\n")
    with pytest.raises(FactorError, match=r"lacks the placeholder \{labels\}"):
        _run(tmp_path / "out", "factors=[instruction]", f"factor_levels={path}")
    assert not (tmp_path / "out").exists()


def test_labels_that_are_not_one_token_stop_before_scoring(runs: dict[str, Path], tmp_path: Path) -> None:
    """A label set from a levels file whose labels are several tokens in context stops the run
    before scoring, naming the variant, the label and the tokens seen; no file is written."""
    path = _levels_file(tmp_path, "labels:\n  odd: [Qz7x, Wv8y, Jx5q, Pk4z]\n")
    out = tmp_path / "out"
    with pytest.raises(ProbeInputError, match=r"variant 3 \(labels=odd\).*letter 'Qz7x' is not one stable token.*"
                                              r"tokens seen"):
        _run(out, "factors=[labels]", f"factor_levels={path}")
    assert not out.exists() or not any(out.iterdir())


def test_report_and_summary_of_a_factor_run(runs: dict[str, Path]) -> None:
    """The report's *In short* and its section open with the wording answer (verdict counts of the
    Holm-controlled tests, the headline's spread; this random tiny model answers with no letter, so
    it says so), then the plain sentence; the components net of noise, the observed split and the
    figure follow; the end-of-run summary prints the interaction test and the verdict counts; a run
    without factors has none of it."""
    from probe.analyses.view import StoredRun
    from probe.report.summary import run_summary

    out = runs["factorial"]
    report = (out / "report.md").read_text()
    section = report[report.index("## Does it survive a change of wording? (36 prompt variants"):]
    block = _json(out / "metrics.json")["format"]
    top = max(block["across"], key=lambda g: block["across"][g]["mean"])
    n_over = block["across"][top]["n_over"]
    counts = block["verdict_counts"]
    own = block["own_term_p_holm"]  # counted: each culture's own term (log-ratio), never a spillover
    moved = [g for g, p in own.items() if p < 0.05]
    answer = f"Wording (36 wordings): {len(moved)} of 4 cultures' own preferences depend on it"
    shares = (f"on the share scale {counts['format-dependent'] + counts['format-reverses']} verdicts are "
              f"format-dependent ({counts['format-reverses']} reverse), {counts['robust']} hold in every wording, "
              f"{counts['none']} show none")
    assert shares in section.split("\n")[2]
    assert section.split("\n")[2].startswith(answer) and "No wording is a letter reading" in section.split("\n")[2]
    opening = next(line for line in report.split("\n") if line.startswith("**In short:**"))
    assert answer in opening and report.index(opening) < report.index("## Does it survive")
    assert section.split("\n")[4].startswith(f"{top} is over-selected in {n_over} of 36 wordings")
    assert all(v["letter_mass_median"] < 0.5 and not v["valid"] for v in block["variants"])
    assert block["validity"]["all_below"] and len(block["analysed_variants"]) == 36
    assert "| all |" in section and "| culture | labels | cue | instruction | rest |" in section
    assert "| group × labels |" in section and "| term | variance | 95% CI | noise removed | RMS |" in section
    assert (out / "figures" / "format_shares.png").is_file()
    summary = run_summary(StoredRun.open(out).task, _json(out / "metrics.json"))
    assert f"format: 36 variants; group × wording interaction p {block['p_interaction']:.3g}" in summary
    assert "robust " in summary
    assert "wording" not in (runs["plain"] / "report.md").read_text()


def _texts(out: Path) -> dict[int, list[str]]:
    """`{variant: its prompts' user messages}` (the rendered text, chat template included)."""
    prompts = pq.read_table(out / "prompts.parquet").to_pydict()
    texts: dict[int, list[str]] = {}
    for v, t in zip(prompts["variant"], prompts["text"]):
        texts.setdefault(v, []).append(t)
    return texts


def test_ccd_and_globalopinion_reword_labels_instruction_and_layout(runs: dict[str, Path]) -> None:
    """CCD-Bench: lower-case labels at the options and the pick instruction in the JSON format
    line's place; the paren layout keeps the format line. GlobalOpinionQA: the labels at its
    options, the instruction after them, each prompt listing only the labels it shows (2 or 11);
    variant 0 keeps each protocol's text."""
    ccd = _texts(runs["ccd"])
    assert [len(ccd[v]) for v in (0, 1, 2)] == [10, 10, 10]
    fmt = "(where X is one of A, B, C, D, E, F, G, H, I, J)."
    assert "\nA. " in ccd[0][0] and fmt in ccd[0][0]
    assert "\na. " in ccd[1][0] and "\nj. " in ccd[1][0] and "Return ONLY valid JSON" not in ccd[1][0]
    assert "answer with its label only, one of a, b, c, d, e, f, g, h, i, j, without" in ccd[1][0]
    assert "\n(A) " in ccd[2][0] and "\nA. " not in ccd[2][0] and fmt in ccd[2][0]
    opinions = _texts(runs["opinions"])
    two, eleven = opinions[1][0], opinions[1][-1]  # the 2-option question's first rotation, the 11's last
    assert "\n(a) Yes" in two and "one of a, b, without" in two and "(A) " not in two
    assert "\n(k) " in eleven and "one of a, b, c, d, e, f, g, h, i, j, k, without" in eleven
    assert "\n(A) Yes" in opinions[0][0] and "Pick one" not in opinions[0][0]
    assert opinions[2] == opinions[0]  # the paren layout is GlobalOpinionQA's own option line
    records = _json(runs["opinions"] / "manifest.json")["variants"]
    assert [r["labels"] for r in records] == [list("ABCDEFGHIJK"), list("abcdefghijk"), list("ABCDEFGHIJK")]
    assert "format" in _json(runs["opinions"] / "metrics.json")


@pytest.mark.parametrize("bench", ["ccd", "globalopinion"])
def test_digit_labels_past_nine_are_refused_naming_the_label(runs: dict[str, Path], bench: str,
                                                             tmp_path: Path) -> None:
    """Ten or more options under `digits`: this tokenizer splits `10`, so the run stops before
    scoring, naming the variant and the label."""
    data = runs["ccd_data" if bench == "ccd" else "opinions_data"]
    with pytest.raises(ProbeInputError, match=r"variant 1 \(labels=digits\).*letter '10' is not one stable token"):
        _run(tmp_path / "out", f"bench.path={data}", "factors=[{labels: digits}]", bench=bench)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_sweep_tables_show_the_group_share_and_verdicts_of_factor_runs(runs: dict[str, Path]) -> None:
    """A sweep's table gains the group share (with its interval) and the verdict counts of its
    factor runs, read from `metrics.json["format"]`; a run without factors there shows `–` with
    why, and a table of runs without factors has neither column."""
    from probe.analyses.view import StoredRun
    from probe.report.sweep import bench_table

    plain, factorial = StoredRun.open(runs["plain"]), StoredRun.open(runs["factorial"])
    block = _json(runs["factorial"] / "metrics.json")["format"]
    lo, hi = (b["group"] for b in block["split_ci95"])
    share = f"{block['split']['group']:.3f} [{lo:.3f}, {hi:.3f}]"
    verdicts = ", ".join(f"{k} {v}" for k, v in block["verdict_counts"].items())
    table = bench_table([plain, factorial], factorial.task)
    assert "format: group share" in table and "format: verdicts" in table
    row = next(line for line in table.splitlines() if share in line)
    assert verdicts in row and sum(block["verdict_counts"].values()) == 4
    assert "not a factor run (no `factors`)" in table
    assert "format:" not in bench_table([plain], plain.task)


def test_the_sweep_summary_table_holds_the_format_numbers(runs: dict[str, Path]) -> None:
    """`summary.parquet`'s long rows gain flavour `format` for a factor run: the variance split with
    its interval, Kendall's W, the verdict counts — the values of `metrics.json["format"]`."""
    from probe.report.entries import summary_rows
    from probe.analyses.view import StoredRun

    block = _json(runs["factorial"] / "metrics.json")["format"]
    rows = {r["metric"]: r for r in summary_rows([StoredRun.open(runs["factorial"])]) if r["flavour"] == "format"}
    assert rows["split.group"]["value"] == block["split"]["group"]
    assert (rows["split.group"]["lo"], rows["split.group"]["hi"]) == tuple(b["group"] for b in block["split_ci95"])
    for factor, share in block["split"]["interactions"].items():
        assert rows[f"split.interactions.{factor}"]["value"] == share
    parts = [rows["split.group"]["value"], rows["split.rest"]["value"],
             *(rows[f"split.interactions.{f}"]["value"] for f in block["split"]["interactions"])]
    assert sum(parts) == pytest.approx(1.0, abs=1e-9)
    assert {k: r["value"] for k, r in rows.items() if k.startswith("verdict_counts.")} == {
        f"verdict_counts.{k}": v for k, v in block["verdict_counts"].items()}
    assert not [r for r in summary_rows([StoredRun.open(runs["plain"])]) if r["flavour"] == "format"]


def test_compare_two_factor_runs_variant_by_variant(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """`probe compare` of two factor runs with the same variants: each variant's headline (its
    prompts alone) in both, paired over the items — a run against itself gives Δ = 0 [0, 0], and A
    is the variant's stored headline; runs whose variant sets differ are refused in one line."""
    from probe.commands.compare import compare_variants, main

    block = _json(runs["factorial"] / "metrics.json")["format"]
    per_variant = compare_variants(runs["factorial"], runs["factorial"], ["C0.KL", "C0.Gini"], n_boot=20)
    assert [name for name, _ in per_variant] == [v["name"] for v in block["variants"]]
    for (_, c), stored in zip(per_variant, block["variants"]):
        kl = c.differences[0]
        assert kl.a == pytest.approx(stored["expected"]["C0"]["KL"], abs=1e-9) and kl.delta == 0
        assert kl.ci95 == (0.0, 0.0) or list(kl.ci95) == [0.0, 0.0]
    assert len({round(c.differences[0].a, 9) for _, c in per_variant}) > 1  # the variants differ
    assert main([str(runs["factorial"]), str(runs["factorial"]), "analysis.n_boot=10"]) == 0
    out = capsys.readouterr().out
    # the terminal gets plain text (the markdown goes to compare.md with --out)
    assert out.count("Variant ") == 36 and "Variant labels=digits,cue=bare,instruction=which:" in out
    assert "###" not in out and "|" not in out
    with pytest.raises(ProbeInputError, match=r"^the factor runs score different variants: only in .*solo: "
                                              r"layout=paren,system=neutral; only in .*factorial: .*cue=answer"):
        compare_variants(runs["solo"], runs["factorial"])


def test_a_base_model_text_holding_the_message_is_reworded_with_it() -> None:
    """GlobalOpinionQA's `Human: … Assistant:` base text holds the message: a reworded variant
    swaps the message inside it; a base text worded apart from its message is refused."""
    from dataclasses import replace
    from types import SimpleNamespace

    from probe.prompts.factors import BUILTIN_FACTORS, expand
    from probe.prompts.variants import variant_prompts
    from probe.types import Prompt

    p = Prompt(prompt_id=0, item_id="q", order=(0, 1), groups=("x", "y"), message="Q?\n(A) yes\n(B) no",
               prefix_key="q", base_text="Human: Q?\n(A) yes\n(B) no\n\nAssistant:")
    variants = expand([{"labels": "lower"}], BUILTIN_FACTORS, admitted=["labels"])
    out = variant_prompts([p], [SimpleNamespace(item_id="q")], variants, lambda i, q, w: "Q?\n(a) yes\n(b) no", "AB")
    assert [q.base_text for q in out] == [p.base_text, "Human: Q?\n(a) yes\n(b) no\n\nAssistant:"]
    with pytest.raises(FactorError, match="base-model text, which this bench does not reword"):
        variant_prompts([replace(p, base_text="Human: other\n\nAssistant:")], [SimpleNamespace(item_id="q")],
                        variants, lambda i, q, w: "x", "AB")
