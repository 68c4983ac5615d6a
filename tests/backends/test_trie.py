"""Prompt-trie planning (pure, no model): the radix tree, chunk cuts, and pass order."""

from __future__ import annotations

import numpy as np
import pytest

from probe.backends.trie import (
    build_chunk,
    cut_chunks,
    plan_trie,
    sort_prompts,
    unique_tokens,
)
from probe.types import Prompt, RenderedPrompt


def _r(pid: int, ids: list[int]) -> RenderedPrompt:
    return RenderedPrompt(Prompt(pid, "i", "C0", None, 0, None, (0,), ("g",), "m", "k"), "", tuple(ids))


def _tree(chunk) -> list[tuple[int, int, list[int], list[int]]]:
    """(parent, start, tokens, prompt ids ending here) per node."""
    return [(n.parent, n.start, n.tokens.tolist(), sorted(r.prompt.prompt_id for r in n.ends)) for n in chunk.nodes]


def test_radix_tree_by_hand() -> None:
    prompts = [_r(0, [1, 2, 3, 4]), _r(1, [1, 2, 5]), _r(2, [1, 2, 3]), _r(3, [7, 8]), _r(4, [1, 2, 3, 4]),
               _r(5, [1, 2, 3, 4, 9, 9])]
    ordered, lcp = sort_prompts(prompts)
    assert [r.prompt.prompt_id for r in ordered] == [2, 0, 4, 5, 1, 3]
    assert lcp.tolist() == [0, 3, 4, 4, 2, 0]
    chunk = build_chunk(ordered, lcp, batch_tokens=1000, max_batch_size=8)
    assert _tree(chunk) == [
        (-1, 0, [1, 2], []),      # split off when [1, 2, 5] arrived
        (-1, 0, [7, 8], [3]),
        (0, 2, [3], [2]),         # prompt 2 ends inside the path of 0, 4 and 5
        (0, 2, [5], [1]),
        (2, 3, [4], [0, 4]),      # identical prompts share their node
        (4, 4, [9, 9], [5]),
    ]
    assert [n.n_children for n in chunk.nodes] == [2, 0, 1, 0, 1, 0]
    assert chunk.unique_tokens == 9 == unique_tokens(prompts)
    assert chunk.path(5) == [0, 2, 4]


def test_passes_run_parents_first_and_leaves_last() -> None:
    prompts = [_r(0, [1, 2, 3, 4]), _r(1, [1, 2, 5]), _r(2, [1, 2, 3]), _r(3, [7, 8]), _r(5, [1, 2, 3, 4, 9, 9])]
    chunk = build_chunk(*sort_prompts(prompts), batch_tokens=1000, max_batch_size=8)
    when = {i: k for k, step in enumerate(chunk.steps) for i in step}
    assert sorted(when) == list(range(len(chunk.nodes)))
    for i, n in enumerate(chunk.nodes):
        assert n.parent < 0 or when[n.parent] < when[i]
    leaves = [when[i] for i, n in enumerate(chunk.nodes) if not n.n_children]
    inner = [when[i] for i, n in enumerate(chunk.nodes) if n.n_children]
    assert min(leaves) > max(inner)  # every leaf in the last wave, whatever its depth
    # that wave is cut by length: [5] is under ¾ of [7, 8] / [9, 9], so it runs on its own
    assert [[chunk.nodes[i].tokens.tolist() for i in step] for step in chunk.steps[-2:]] == [[[9, 9], [7, 8]], [[5]]]


def test_unique_tokens_is_the_number_of_distinct_prefixes() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        prompts = [_r(i, rng.integers(0, 3, size=rng.integers(1, 9)).tolist()) for i in range(rng.integers(1, 30))]
        prefixes = {tuple(r.token_ids[:k].tolist()) for r in prompts for k in range(1, len(r.token_ids) + 1)}
        assert unique_tokens(prompts) == len(prefixes)
        chunks = plan_trie(prompts, batch_tokens=1 << 20, max_batch_size=64)
        assert len(chunks) == 1 and chunks[0].unique_tokens == len(prefixes)


@pytest.mark.parametrize("budget,rows", [(10_000, 64), (200, 64), (120, 3), (1, 1)])
def test_plan_respects_budgets_and_covers_everything(budget: int, rows: int) -> None:
    rng = np.random.default_rng(1)
    prompts = [_r(i, [100 + i // 8] * 30 + rng.integers(0, 4, size=5 + i % 7).tolist()) for i in range(40)]
    chunks = plan_trie(prompts, budget, rows)
    ended = sorted(r.prompt.prompt_id for c in chunks for n in c.nodes for r in n.ends)
    assert ended == sorted(r.prompt.prompt_id for c in chunks for r in c.prompts) == list(range(40))
    for c in chunks:
        assert c.unique_tokens <= budget or len(c.prompts) == 1
        for step in c.steps:
            nodes = [c.nodes[i] for i in step]
            width = max(n.start for n in nodes) + max(len(n.tokens) for n in nodes)
            assert len(step) <= rows and (len(step) * width <= budget or len(step) == 1)
    assert sum(c.unique_tokens for c in chunks) >= unique_tokens(prompts)


def test_chunks_are_cut_where_the_two_sides_share_least() -> None:
    """Between two items that share only a 2-token header, not inside an item (which shares 30)."""
    lengths = np.array([40, 40, 40, 40, 40, 40])
    lcp = np.array([0, 30, 30, 2, 30, 30])
    assert cut_chunks(lengths, lcp, budget=70) == [(0, 3), (3, 6)]  # 40 + 10 + 10 fits; one more does not
    assert cut_chunks(lengths, lcp, budget=1000) == [(0, 6)]
    assert cut_chunks(lengths, lcp, budget=55) == [(0, 2), (2, 3), (3, 5), (5, 6)]
    assert cut_chunks(lengths, lcp, budget=10) == [(k, k + 1) for k in range(6)]  # a prompt alone may exceed it
