"""`bench.limit`: the first N items (LocQA: templates) of every benchmark."""

from __future__ import annotations

import pytest
from conftest import ccd_items, prepare, shared_dir, write_json_file


def test_disco_limit_keeps_the_first_items() -> None:
    full = prepare({"kind": "disco", "packaged": "demo_disco.csv"})
    two = prepare({"kind": "disco", "packaged": "demo_disco.csv", "limit": 2})
    assert [i.item_id for i in two.items] == [i.item_id for i in full.items[:2]]
    assert len(two.prompts) == 2 * 52 and two.prompts == full.prompts[:104]


def test_ccd_limit_keeps_the_first_items(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = write_json_file(tmp_path / "c.json", ccd_items(5))
    assert len(prepare({"kind": "ccd", "path": str(path), "limit": 3}).items) == 3


def test_locqa_limit_keeps_the_first_templates() -> None:
    root = shared_dir()
    if root is None or not (root / "data" / "locqa" / "locqa.json").is_file():
        pytest.skip("the LocQA file needs $PROBE_SHARED_DIR/data/locqa/locqa.json")
    path = str(root / "data" / "locqa" / "locqa.json")
    full = prepare({"kind": "locqa", "path": path})
    three = prepare({"kind": "locqa", "path": path, "limit": 3})
    first = list(dict.fromkeys(q.template for q in full.items))[:3]
    assert list(dict.fromkeys(q.template for q in three.items)) == first
    assert len(three.prompts) == sum(q.template in first for q in full.items)
