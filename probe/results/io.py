"""Parquet writes that a reader never sees half-done (temporary name, then an atomic rename),
and safetensors reads that fail with one line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from safetensors import SafetensorError, safe_open

from probe.errors import ProbeInputError


def write_table(path: Path, table: pa.Table) -> None:
    """Write `table` to `path` through a temporary file and an atomic rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


@contextmanager
def open_tensors(path: Path) -> Iterator[Any]:
    """`safe_open(path)` (numpy) whose failures — a truncated or damaged file, one that cannot be
    read — are a one-line `ProbeInputError` naming the file, also when they arise while reading."""
    try:
        with safe_open(str(path), framework="numpy") as f:
            yield f
    except (SafetensorError, OSError) as e:
        raise ProbeInputError(f"{path}: unreadable safetensors file ({e}); it is truncated or damaged: restore it "
                              "or rerun the run that wrote it") from e
