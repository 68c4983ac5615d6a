"""Whether a run can get its model's files, asked before any data is read or library imported.

A hub model that is neither in the hub cache nor downloadable would otherwise be found missing
only once transformers tries it: after the bench's data, seconds of imports and (with the hub
silent rather than switched off) tens of seconds of retries. Here the cache is looked up
(files only, no network), then the hub is asked once with a short timeout
(`probe.models.load.hub_reachable`), and a model that cannot be had stops with one line naming
what is missing and how to point at a local copy instead.
"""

from __future__ import annotations

import logging
from pathlib import Path

from probe.errors import ProbeInputError
from probe.models.load import ModelSpec, hub_reachable

log = logging.getLogger(__name__)

LOCAL_COPY = "model.hub_id=<directory>"
"""How a run points at a local checkpoint (spelled the same in `--help`, errors and the docs)."""
CONFIG_FILE = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")
"""Any one of them is a tokenizer transformers can start from."""
PATH_PREFIXES = ("/", "./", "../", "~")
"""A `hub_id` starting so is meant as a directory, never a hub id."""


def check_available(spec: ModelSpec, weights: bool, key: str = "model") -> None:
    """Stop with one line when `spec` is a hub model whose config and tokenizer are not in the hub
    cache while the hub cannot be reached (`HF_HUB_OFFLINE=1`, or no answer within seconds), or
    when its `hub_id` is a path that is not a directory. Models built here (tiny), shipped
    (gguf, or a gguf fallback) or read from a directory need nothing. `weights`: whether the run
    loads the weights too (a dry run reads only the config and tokenizer). `key`: the config key
    the model came from (`model`, `judge.model`), for the message."""
    ref = spec.hub_id
    if spec.source in ("tiny", "gguf") or ref is None or Path(ref).expanduser().is_dir():
        return
    if ref.startswith(PATH_PREFIXES) or spec.source == "path":
        raise ProbeInputError(f"{key} {spec.name!r}: {ref} is not a directory; {LOCAL_COPY} must name a checkpoint "
                              "directory (its config, tokenizer and weights files, as save_pretrained writes them)")
    if (spec.source == "auto" and spec.gguf is not None) or _cached(ref, spec.revision):
        return
    from huggingface_hub import constants  # light: constants only

    needs = "config, tokenizer and weights" if weights else "config and tokenizer (a dry run loads no weights)"
    if hub_reachable():  # say what is fetched before fetching it: a large download is not a hang
        log.info("%s %r: downloading %s's %s from the hub into %s", key, spec.name, ref, needs, constants.HF_HUB_CACHE)
        return
    why = "HF_HUB_OFFLINE=1" if constants.HF_HUB_OFFLINE else "no answer within 3 s"
    raise ProbeInputError(
        f"{key} {spec.name!r} needs {ref}'s {needs}, which are not in the hub cache {constants.HF_HUB_CACHE}, "
        f"and the hub cannot be reached ({why}); download them once where it can (same HF_HOME), "
        f"or point at a local copy with {LOCAL_COPY}")


def _cached(ref: str, revision: str | None) -> bool:
    """Whether the hub cache holds `ref`'s config and a tokenizer file (a file-system lookup)."""
    from huggingface_hub import try_to_load_from_cache

    def has(name: str) -> bool:
        try:
            return isinstance(try_to_load_from_cache(ref, name, revision=revision), str)
        except ValueError:  # not a valid hub id (HFValidationError): nothing of it can be cached
            return False

    return has(CONFIG_FILE) and any(has(name) for name in TOKENIZER_FILES)
