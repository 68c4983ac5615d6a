"""Run-directory writing: streamed score parts merge into the contract files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from safetensors.numpy import load_file

from probe.files import write_json
from probe.results.scores import ScoreWriter
from probe.types import LetterScore


def test_score_writer_streams_parts_and_merges_sorted(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    order = rng.permutation(23)
    lp = np.log(rng.dirichlet(np.ones(5), size=23) * 0.8).astype(np.float32)[:, :4]
    writer = ScoreWriter(tmp_path, "ABCD", chunk=5)
    for start in range(0, 23, 3):  # batches arrive in backend (length-sorted) order
        writer.add([LetterScore(int(i), tuple(lp[i]), bool(i % 2)) for i in order[start:start + 3]])
    assert len(list((tmp_path / "scores.parts").glob("part-*.parquet"))) == 4  # buffers of 6, 6, 6 and 5 reach the chunk of 5
    writer.close()
    # the parts stay (with their checksums) until the pipeline has written DONE
    index = json.loads((tmp_path / "scores.parts" / "index.json").read_text())
    assert sorted(index) == sorted(p.name for p in (tmp_path / "scores.parts").glob("part-*.parquet"))
    table = pq.read_table(tmp_path / "scores.parquet")
    assert table.column("prompt_id").to_pylist() == list(range(23))
    got = np.array(table.column("letter_logprobs").to_pylist(), dtype=np.float32)
    assert np.array_equal(got, lp)
    assert table.column("greedy_valid").to_pylist() == [bool(i % 2) for i in range(23)]
    assert np.allclose(table.column("letter_mass").to_numpy(), np.exp(lp.astype(np.float64)).sum(axis=1))
    assert np.array_equal(load_file(str(tmp_path / "scores.safetensors"))["letter_logprobs"], lp)


def test_json_writes_null_for_undefined(tmp_path: Path) -> None:
    write_json(tmp_path / "m.json", {"a": float("nan"), "b": [1.0, float("inf")], "c": {"d": 2}})
    assert (tmp_path / "m.json").read_text().split() == ['{', '"a":', 'null,', '"b":', '[', '1.0,', 'null', '],',
                                                         '"c":', '{', '"d":', '2', '}', '}']


def test_score_writer_stores_the_argmax_token(tmp_path: Path) -> None:
    """The argmax id and log-prob travel through the parts; its text is decoded once per id;
    a backend that reports none leaves the columns null."""
    decoded: list[int] = []

    def decode(token_id: int) -> str:
        decoded.append(token_id)
        return f"<{token_id}>"

    writer = ScoreWriter(tmp_path, "AB", chunk=2, decode=decode)
    writer.add([LetterScore(0, (-1.0, -2.0), False, argmax_token_id=7, argmax_logprob=-0.25),
                LetterScore(1, (-0.5, -2.0), True, argmax_token_id=3, argmax_logprob=-0.5)])
    writer.add([LetterScore(2, (-3.0, -4.0), False, argmax_token_id=7, argmax_logprob=-0.125),
                LetterScore(3, (-1.0, -1.5), True)])
    writer.close()
    rows = pq.read_table(tmp_path / "scores.parquet").to_pylist()
    assert [r["argmax_token_id"] for r in rows] == [7, 3, 7, None]
    assert [r["argmax_token"] for r in rows] == ["<7>", "<3>", "<7>", None]
    assert [r["argmax_logprob"] for r in rows] == [-0.25, -0.5, -0.125, None]
    assert sorted(decoded) == [3, 7]
