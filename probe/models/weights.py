"""A digest of a local model directory's weights, for the run key.

A model loaded from a directory (`model.source=path`, or `auto` naming one) has no hub commit
to pin it: a directory swapped between a kill and its resume would mix two models' scores in
one run. Its `weights_sha256` covers every weight file (by suffix, see `WEIGHT_SUFFIXES`) and
`config.json`: each file's name, size and the sha256 of its bytes. The files are hashed whole,
streamed in 1 MiB chunks, several at once (a sharded checkpoint's shards in parallel threads:
hashlib releases the GIL on large buffers), once per run, before the run directory is claimed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from probe.errors import ProbeInputError
from probe.files import sha256_file, write_text

log = logging.getLogger(__name__)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".msgpack", ".h5", ".index.json")
"""File name endings of weight files and of the index mapping tensors to sharded files."""
ALSO_HASHED = ("config.json",)
"""Other files whose content changes the numbers (the architecture's hyper-parameters)."""
MAX_THREADS = 4
CONVERTED_MARK = "probe-converted.sha256"
"""In a directory probe converted a model into (a GGUF dequantised to safetensors): the
`weights_digest` of what the conversion wrote. Not itself a weight file, so not in the digest."""


def weight_files(directory: Path) -> list[Path]:
    """The files of `directory` (top level, as `from_pretrained` reads them) the digest covers,
    sorted by name."""
    return sorted(p for p in directory.iterdir()
                  if p.is_file() and (p.name in ALSO_HASHED or p.name.endswith(WEIGHT_SUFFIXES)))


def weights_digest(directory: Path) -> str:
    """One sha256 over `[name, size, sha256]` of each file `weight_files` lists."""
    files = weight_files(directory)
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(files), os.cpu_count() or 1))) as pool:
        hashes = list(pool.map(sha256_file, files))
    listed = [[p.name, p.stat().st_size, h] for p, h in zip(files, hashes)]
    return hashlib.sha256(json.dumps(listed).encode()).hexdigest()


def pin_converted(directory: Path) -> None:
    """Record the digest of a conversion's output in it (`CONVERTED_MARK`), before it is renamed
    into place, so every later load can tell the converted weights from an edited copy."""
    write_text(directory / CONVERTED_MARK, weights_digest(directory) + "\n")


def check_converted(directory: Path) -> str:
    """The digest of a converted model directory, refused in one line when it differs from the one
    its conversion recorded: a cached copy edited afterwards (two shards, or a run and its resume,
    would otherwise score two models as one). A directory converted before digests were recorded
    gets its record now. Returns the digest."""
    digest = weights_digest(directory)
    mark = directory / CONVERTED_MARK
    if not mark.is_file():
        try:
            write_text(mark, digest + "\n")
        except OSError as e:  # a read-only shared cache: loads, unpinned, and says so
            log.warning("cannot record the digest of %s (%s): its weights are not pinned", directory, e.strerror)
        return digest
    recorded = mark.read_text(encoding="utf-8", errors="replace").strip()
    if recorded != digest:
        raise ProbeInputError(f"{directory}: the converted weights changed after their conversion (sha256 "
                              f"{digest[:12]}…, recorded {recorded[:12]}…); remove the directory and rerun: probe "
                              "converts the model again")
    return digest
