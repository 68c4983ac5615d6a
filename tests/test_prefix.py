"""Shared-prefix planning (pure, no model)."""

from __future__ import annotations

from probe.backends.prefix import (
    common_prefix_len,
    group_by_prefix,
    plan_prefix_batches,
)
from probe.types import Prompt, RenderedPrompt


def _r(pid: int, key: str, ids: list[int]) -> RenderedPrompt:
    p = Prompt(pid, "i", "C0", None, 0, None, (0,), ("g",), "m", key)
    return RenderedPrompt(prompt=p, text="", token_ids=tuple(ids))


def test_common_prefix_len() -> None:
    assert common_prefix_len([[1, 2, 3], [1, 2, 4], [1, 2, 3, 5]]) == 2
    assert common_prefix_len([[1, 2], [1, 2, 3]]) == 2
    assert common_prefix_len([[9], [1]]) == 0


def test_groups_keep_one_token_of_their_own() -> None:
    groups = group_by_prefix([_r(0, "a", [1, 2, 3]), _r(1, "a", [1, 2, 3, 4]), _r(2, "b", [7, 8, 9]),
                              _r(3, "a", [1, 2, 5, 6])])
    assert [[r.prompt.prompt_id for r in g.rows] for g in groups] == [[0, 1, 3], [2]]
    assert [g.prefix_len for g in groups] == [2, 2]  # group b: a lone prompt keeps its last token
    assert groups[0].max_suffix == 2 and groups[0].width == 4


def test_plan_respects_budget_rows_and_covers_everything() -> None:
    prompts = [_r(i, f"k{i // 4}", [100 + i // 4] * 30 + [i] * (5 + i % 7)) for i in range(40)]
    groups = group_by_prefix(prompts)
    for budget, rows in ((10_000, 64), (200, 64), (1_000, 3), (1, 1)):
        batches = plan_prefix_batches(groups, budget, rows)
        ids = sorted(r.prompt.prompt_id for b in batches for g in b for r in g.rows)
        assert ids == list(range(40))
        for b in batches:
            n = sum(len(g.rows) for g in b)
            width = max(g.prefix_len for g in b) + max(g.max_suffix for g in b)
            assert n <= rows and (n * width <= budget or n == 1)
