"""The backends' work plans as pure functions of the spec and the prompts (no model needed).

A backend runs its prompts in indivisible units: an HF trie chunk (its passes share KV), an HF
generation batch, a vLLM engine call. A unit's numbers depend on what else is in it (batched
matmuls sum in another order for another batch shape), so a run that must reproduce another
bit for bit — a resumed run, or one shard of a run — plans over *all* prompts and skips the
units it does not own. The backends call these functions themselves, so a plan made here
(for sharding, before any weights load) is the plan they execute.
"""

from __future__ import annotations

from collections.abc import Sequence

from probe.backends.batching import plan_batches
from probe.backends.specs import BackendSpec, HFBackendSpec
from probe.backends.trie import EditFrom, TrieChunk, TrieNode, plan_trie, sort_prompts
from probe.types import RenderedPrompt


def score_chunks(prompts: Sequence[RenderedPrompt], spec: HFBackendSpec,
                 edit_from: EditFrom | None = None) -> list[TrieChunk]:
    """The HF scorer's chunks: trie chunks with prefix reuse (respecting interventions' edit
    starts, `probe.backends.trie.cap_shared`), else plain right-padded batches."""
    if spec.prefix_reuse:
        return plan_trie(prompts, spec.batch_tokens, spec.max_batch_size, edit_from)
    return [plain_chunk(b) for b in plan_batches(prompts, spec.batch_tokens, spec.max_batch_size)]


def plain_chunk(prompts: Sequence[RenderedPrompt]) -> TrieChunk:
    """One right-padded pass of whole prompts, no sharing (`prefix_reuse=False`)."""
    nodes = tuple(TrieNode(parent=-1, start=0, tokens=r.token_ids, ends=(r,), n_children=0) for r in prompts)
    return TrieChunk(nodes=nodes, steps=(tuple(range(len(nodes))),), prompts=tuple(prompts))


def generate_batches(prompts: Sequence[RenderedPrompt], spec: HFBackendSpec) -> list[list[RenderedPrompt]]:
    """The HF generator's batches: runs of the trie order with prefix reuse (neighbours share
    the most), else length-sorted batches."""
    if spec.prefix_reuse:
        return plan_batches(sort_prompts(prompts)[0], spec.batch_tokens, spec.max_batch_size, keep_order=True)
    return plan_batches(prompts, spec.batch_tokens, spec.max_batch_size)


def item_runs(prompts: Sequence[RenderedPrompt]) -> list[list[RenderedPrompt]]:
    """Each item's prompts, items in trie order (of their first prompt). vLLM's units: its engine
    schedules requests as it likes, so no plan of ours reproduces its numbers bitwise, and a
    shard may as well own whole items in any calls (agreeing within the engine's tolerance)."""
    runs: dict[str, list[RenderedPrompt]] = {}
    for r in sort_prompts(prompts)[0]:
        runs.setdefault(r.prompt.item_id, []).append(r)
    return list(runs.values())


def work_units(spec: BackendSpec, prompts: Sequence[RenderedPrompt], generate: bool) -> list[list[RenderedPrompt]]:
    """The prompts of each unit of work, in the order the backend `spec` names runs them."""
    if not prompts:
        return []
    if isinstance(spec, HFBackendSpec):
        if generate:
            return generate_batches(prompts, spec)
        return [list(c.prompts) for c in score_chunks(prompts, spec)]
    return item_runs(prompts)
