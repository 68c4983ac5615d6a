"""Named devices and the predicted scoring time of a plan on one (`probe.backends.cost`).

GPU figures are the vendors' data-sheet numbers, dense (no 2:4 sparsity):
- NVIDIA H100 SXM5 (H100 Tensor Core GPU datasheet): BF16 989 TFLOP/s, FP32 67 TFLOP/s, HBM3 3.35 TB/s.
- NVIDIA H200 SXM (H200 Tensor Core GPU datasheet): BF16 989 TFLOP/s, FP32 67 TFLOP/s, HBM3e 4.8 TB/s.
- NVIDIA A100 80GB SXM (A100 Tensor Core GPU datasheet): BF16 312 TFLOP/s, FP32 19.5 TFLOP/s,
  HBM2e 2,039 GB/s.
"cpu" is measured where it runs: the float32 GEMM rate of this process's threads, the rate of
masked attention (SDPA), which a CPU runs at about half the GEMM rate, and a copy bandwidth
(`measure_cpu`). A GPU's attention is counted at its matmul peak.

The host's dispatch of a pass (transformers' eager forward: Python and operator launches, the
trie's KV gathering, masks and position ids) costs `HOST_S_PER_LAYER` per layer plus
`HOST_S_PER_PASS`; both were measured in CPU time, one thread, on the 2-core development
machine with `scripts/bench_costmodel.py --overhead` (`measure_host`: 0.20–0.24 ms per layer,
0.25–0.32 ms per pass over two invocations) and serve for the GPUs too, whose host work is the
same Python (a GPU server's faster cores would only lower it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from probe.backends.cost import Arch, PassShape, pass_cost, plan_passes, useful_flops
from probe.backends.treekv import KVStore, decoder_and_cache_kw, run_pass
from probe.backends.trie import TrieChunk, TrieNode

HOST_S_PER_LAYER = 0.22e-3
"""Host dispatch per decoder layer of a pass, seconds (measured; see the module docstring)."""
HOST_S_PER_PASS = 0.3e-3
"""Host work per pass outside the layers (padding, masks, position ids, the ancestors' KV set-up), seconds."""


@dataclass(frozen=True)
class Device:
    """Peak rates of a device, as the roofline uses them."""

    name: str
    matmul_flops: float
    """Dense matrix-product FLOP/s in the run's dtype (bf16 tensor cores; fp32 GEMM on a CPU)."""
    fp32_flops: float
    """FLOP/s of the float32 LM head."""
    attention_flops: float
    """FLOP/s of masked attention (a GPU: the matmul peak; a CPU: measured, it runs well below GEMM)."""
    bandwidth: float
    """Memory bytes/s."""
    overlaps_host: bool
    """The device computes while the host dispatches (a GPU), else the two add up (a CPU)."""
    host_s_per_layer: float = HOST_S_PER_LAYER
    host_s_per_pass: float = HOST_S_PER_PASS


DEVICES: dict[str, Device] = {
    "h100": Device("H100 SXM", 989e12, 67e12, 989e12, 3.35e12, True),
    "h200": Device("H200 SXM", 989e12, 67e12, 989e12, 4.8e12, True),
    "a100": Device("A100 80GB SXM", 312e12, 19.5e12, 312e12, 2.039e12, True),
}


Clock = Callable[[], float]


def measure_cpu(seconds: float = 1.0, clock: Clock = time.perf_counter) -> Device:
    """This process's CPU: float32 GEMM FLOP/s (2048² products), masked attention FLOP/s (SDPA
    of 16 rows × 40 queries over 400 keys, 9 heads of 64: a trie pass's shape) and copy
    bandwidth (a 256 MiB tensor copied: read + write), each the mean rate over about `seconds`
    of `clock` (wall time, or `time.process_time` to count only the time this process ran on a
    shared machine)."""
    import torch
    import torch.nn.functional as F

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    flops = rate(lambda: a @ b, 2.0 * 2048**3, seconds, clock)
    q, k, v = torch.randn(16, 9, 40, 64), torch.randn(16, 9, 400, 64), torch.randn(16, 9, 400, 64)
    mask = torch.ones(16, 1, 40, 400, dtype=torch.bool).tril(360)
    attention = rate(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), 4.0 * 16 * 9 * 40 * 400 * 64,
                      seconds, clock)
    src = torch.empty(64 << 20, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    bandwidth = rate(lambda: dst.copy_(src), 2.0 * src.numel() * 4, seconds, clock)
    return Device("cpu (measured)", flops, flops, attention, bandwidth, False)


def rate(work: Callable[[], object], amount: float, seconds: float, clock: Clock) -> float:
    """`amount` per second of `work()`, over repetitions filling `seconds` (after one warm-up)."""
    work()
    reps, t0 = 0, clock()
    while clock() - t0 < seconds:
        work()
        reps += 1
    return amount * reps / (clock() - t0)


def measure_host(reps: int = 30, clock: Clock = time.perf_counter) -> tuple[float, float]:
    """`(seconds per layer, seconds per pass)` of host dispatch: the median time of a trie pass
    (`probe.backends.treekv.run_pass`: two rows on a 4-token cached path, mask and position ids
    built as in scoring) on random 2- and 16-layer Llama decoders of hidden size 64, where the
    arithmetic is negligible; the slope over layers, and the rest."""
    import numpy as np
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    nodes = (TrieNode(-1, 0, np.array([5, 6, 7, 8]), (), 2), TrieNode(0, 4, np.array([9]), (), 0),
             TrieNode(0, 4, np.array([10, 11]), (), 0))
    chunk = TrieChunk(nodes=nodes, steps=((0,), (1, 2)))
    medians = []
    for layers in (2, 16):
        torch.manual_seed(0)
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=2,
                             num_key_value_heads=1, head_dim=32, vocab_size=512)
        decoder, cache_kw = decoder_and_cache_kw(LlamaForCausalLM(config).eval())
        times = []
        with torch.inference_mode():
            for _ in range(reps + 1):
                store = KVStore.for_chunk(chunk)
                run_pass(decoder, cache_kw, chunk, (0,), store)
                t0 = clock()
                run_pass(decoder, cache_kw, chunk, (1, 2), store)
                times.append(clock() - t0)
        medians.append(sorted(times[1:])[reps // 2])
    per_layer = (medians[1] - medians[0]) / 14
    return per_layer, max(0.0, medians[0] - 2 * per_layer)


@dataclass(frozen=True)
class Prediction:
    """The plan's predicted scoring time on a device."""

    device: str
    seconds: float
    n_passes: int
    flops: float
    """FLOPs computed, padding included."""
    useful_flops: float
    """FLOPs of the real tokens (the trie's unique tokens and their real contexts)."""
    matmul_flops: float
    """The device's peak, for MFU."""

    @property
    def mfu(self) -> float:
        """Useful FLOPs per second over the device's matmul peak; NaN for a plan with no work
        (an empty plan has no utilisation, and 0% would read as a measurement)."""
        return self.useful_flops / self.seconds / self.matmul_flops if self.seconds else float("nan")

    def line(self) -> str:
        """`predicted time on <device>: …` as a dry run prints it."""
        return (f"predicted time on {self.device}: {self.seconds:.3g} s of scoring ({self.n_passes} passes, "
                f"{self.useful_flops / 1e12:.3g} TFLOP on unique tokens; MFU {self.mfu:.1%}; "
                "pass-level roofline, see probe/backends/cost.py)")


def pass_seconds(arch: Arch, shape: PassShape, device: Device, dtype_bytes: int) -> float:
    """Roofline time of one pass: linear layers, attention and head each at the slower of their
    compute and their memory traffic, copies and elementwise traffic at bandwidth, and the
    host's dispatch added (CPU) or overlapped (GPU)."""
    c = pass_cost(arch, shape, dtype_bytes)
    head_bytes = arch.vocab * arch.hidden * 4 if shape.head_rows else 0
    layer_weights = c.weight_bytes - head_bytes
    linear = max(c.linear_flops / device.matmul_flops, layer_weights / device.bandwidth)
    attention = max(c.attention_flops / device.attention_flops, c.kv_read_bytes / device.bandwidth)
    head = max(c.head_flops / device.fp32_flops, head_bytes / device.bandwidth)
    memory = (c.copy_bytes + c.act_bytes) / device.bandwidth
    work = linear + attention + head + memory
    host = device.host_s_per_pass + device.host_s_per_layer * arch.layers
    return max(work, host) if device.overlaps_host else work + host


def predict(arch: Arch, shapes: Sequence[PassShape], device: Device, dtype_bytes: int) -> Prediction:
    """The summed pass times of a plan, with its FLOPs (computed and useful)."""
    return Prediction(device=device.name, seconds=sum(pass_seconds(arch, s, device, dtype_bytes) for s in shapes),
                      n_passes=len(shapes), flops=sum(pass_cost(arch, s, dtype_bytes).flops for s in shapes),
                      useful_flops=sum(useful_flops(arch, s) for s in shapes), matmul_flops=device.matmul_flops)


def named_device(name: str, clock: Clock = time.perf_counter) -> Device:
    """A device of `DEVICES`, or `cpu`: this process's CPU, measured now on `clock` (a few seconds)."""
    if name == "cpu":
        per_layer, per_pass = measure_host(clock=clock)
        return replace(measure_cpu(clock=clock), host_s_per_layer=per_layer, host_s_per_pass=per_pass)
    return DEVICES[name]


def predict_chunks(config: Any, chunks: Sequence[TrieChunk], device: str, dtype_bytes: int) -> Prediction:
    """The predicted scoring time of planned chunks for a model config (no weights needed)."""
    return predict(Arch.from_config(config), plan_passes(chunks), named_device(device), dtype_bytes)
