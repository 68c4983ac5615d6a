"""`run_key.json`, the results key: everything that changes a stored number (model, tokenizer,
template, letter ids, bench data and config, backend, mechanistic outputs, judge, intervention;
built by `probe.pipeline.provenance.run_key`). A run writes it when it claims its directory and a
resumed run must match it; it is compared whole, so it stays a JSON object, and the few parts
other code needs are read here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from probe.files import write_json
from probe.results.io import read_json_object
from probe.results.layout import RUN_KEY


def as_stored(key: dict[str, Any]) -> dict[str, Any]:
    """`key` as it reads back from the file (tuples as lists), to compare with a stored one."""
    return json.loads(json.dumps(key))


def read_run_key(run_dir: Path) -> dict[str, Any] | None:
    """The key stored in `run_dir` (None: no run claimed it)."""
    path = Path(run_dir) / RUN_KEY
    return read_json_object(path) if path.is_file() else None


def write_run_key(run_dir: Path, key: dict[str, Any]) -> None:
    write_json(Path(run_dir) / RUN_KEY, key)


def changed_inputs(stored: dict[str, Any], key: dict[str, Any]) -> str | None:
    """What changed between two keys' inputs, in words — the bench data read (`bench.data_sha256`)
    or the local model directory's weights (`model.weights_sha256`) — or None when neither did
    (or a key predates the digest: the caller's generic difference then says so)."""
    changes = []
    for what, block, name in (("the bench data", "bench", "data_sha256"), ("the model weights", "model", "weights_sha256")):
        old, new = (k.get(block, {}).get(name) for k in (stored, key))
        if old != new and old is not None and new is not None:
            changes.append(f"{what} ({name} {str(old)[:12]}… vs {str(new)[:12]}…)")
    return " and ".join(changes) or None


DIGESTS = (("bench", "data_sha256"), ("model", "weights_sha256"))
"""The key's digests of the inputs read (`changed_inputs` names which changed)."""


def without_digests(key: dict[str, Any]) -> dict[str, Any]:
    """`key` without its input digests: what the configuration alone says."""
    out = copy.deepcopy(key)
    for block, name in DIGESTS:
        if isinstance(out.get(block), dict):
            out[block].pop(name, None)
    return out


def key_shard(key: dict[str, Any]) -> str | None:
    """The shard (`i/n`) a key's bench config names (None: a whole run)."""
    shard = key["bench"]["config"].get("shard")
    return None if shard is None else str(shard)


def key_device(key: dict[str, Any]) -> Any:
    """The backend device a key names (shards of one run may each have their own)."""
    return key["backend"].get("device")


def unsharded(key: dict[str, Any]) -> dict[str, Any]:
    """A shard's key without its shard and its device: what the shards of one run share."""
    out = copy.deepcopy(key)
    out["bench"]["config"].pop("shard", None)
    out["backend"].pop("device", None)
    return out


def with_device(key: dict[str, Any], device: Any) -> dict[str, Any]:
    """`key` naming `device` as its backend's."""
    out = copy.deepcopy(key)
    out["backend"]["device"] = device
    return out
