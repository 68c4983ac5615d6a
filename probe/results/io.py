"""Table writes that a reader never sees half-done (temporary name, then an atomic rename),
never through a symbolic link (`probe.files.open_new`): parquet, and CSV with spreadsheet formulas
neutralised; JSON and safetensors reads that fail with one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from safetensors import SafetensorError, safe_open

from probe.bounded import loads_json
from probe.errors import ProbeInputError
from probe.escape import FORMULA_START
from probe.files import open_new



def parquet_source(path: Path) -> str | pa.BufferReader:
    """What pyarrow reads `path` from: the path itself, or — for a path that is not UTF-8 (a
    directory named in another encoding), which pyarrow's file system cannot open — the file's
    bytes, so a good run there reads as it does anywhere else."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return pa.BufferReader(Path(path).read_bytes())
    return str(path)


def write_table(path: Path, table: pa.Table) -> None:
    """Write `table` to `path` through a temporary file and an atomic rename."""
    with open_new(path) as f:
        pq.write_table(table, f)


def write_csv(path: Path, table: pa.Table) -> None:
    """Write `table` as CSV (atomically), every text cell that starts with `=`, `+`, `-`, `@`, a tab
    or a carriage return prefixed with a single quote (`probe.escape.spreadsheet_cell`'s rule, on
    whole columns), as OWASP advises, so a model or culture
    named `=HYPERLINK(…)` is shown as text, not run as a formula. Only text columns are touched:
    numbers stay numbers (a negative value is written `-0.5`, unquoted, and read as a number);
    text is always quoted, so a comma inside a cell never starts another."""
    columns = [_escape(c) if pa.types.is_string(c.type) or pa.types.is_large_string(c.type) else c
               for c in table.columns]
    with open_new(path) as f:
        pacsv.write_csv(pa.Table.from_arrays(columns, schema=table.schema), f)


def _escape(column: pa.ChunkedArray) -> pa.ChunkedArray:
    quoted = pc.binary_join_element_wise(pa.scalar("'", column.type), column, pa.scalar("", column.type))
    return pc.if_else(pc.match_substring_regex(column, FORMULA_START), quoted, column)


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


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object stored in `path` (a run's `manifest.json`, `metrics.json`); a one-line
    `ProbeInputError` naming the file (its whole path: the run too) when it is unreadable,
    truncated, nested too deeply or not an object."""
    try:
        obj = loads_json(path.read_text(encoding="utf-8"), str(path))  # at most MAX_DEPTH deep
    except json.JSONDecodeError as e:
        raise ProbeInputError(f"{path}: invalid or truncated JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProbeInputError(f"{path}: unreadable ({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict):
        raise ProbeInputError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj
