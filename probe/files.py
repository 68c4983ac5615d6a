"""Whole-file writes that a reader never sees half-done, and content checksums.

Every file probe writes goes to a temporary name in the same directory and is renamed into
place, so a killed process leaves either the old file, the new file, or a `.tmp` that readers
ignore — never a truncated file under the final name.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and an atomic rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    """JSON with NaN/inf written as null (they are not valid JSON)."""
    atomic_write_bytes(path, (json.dumps(_finite(obj), indent=2, sort_keys=False) + "\n").encode())


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def utf8_error(path: Path) -> str:
    """Where a file stops being valid UTF-8, as `line N, byte B (…)`, for input-error messages
    (a decoder's own offset counts from the start of its read buffer, not of the file)."""
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"line {number}, byte {e.start + 1} of the line: {e.reason}"
    return "no invalid byte found on a second read"
