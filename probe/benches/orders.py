"""Option-order designs every forced-choice bench can present (`bench.orders`; docs/concepts/orders.md).

A design gives, for an item with K options, the orderings to show it under: each ordering is one
prompt per condition, `ordering[i]` the canonical option shown at letter i. The designs:

- `rotations` (default): the K cyclic shifts, option (i + r) mod K at letter i — every option once
  at every letter (a Latin square), so the letter's main effect averages out exactly;
- `permutations`: all K! orderings in lexicographic order; above `bench.orders_cap` a seeded
  uniform sample of `bench.orders_sample` of them, without replacement (refused without one);
- `williams`: a Williams design, K orderings for even K, 2K for odd K — every option at every
  letter equally often and immediately after every other option equally often (balanced for
  first-order carry-over);
- `reverse`: the item's own order and its reverse (survey practice for ordinal scales: the scale
  is never cut and wrapped around, its direction is).

`design_balance` says what a set of orderings balances; the letter-prior analysis reads the
same property from the stored `order` column, so a stored run needs no design name to be read.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from probe.config import Ge, Le, Seed
from probe.errors import ProbeInputError

__all__ = ["BALANCES", "DEFAULT_CAP", "MAX_CAP", "OrderCap", "Seed", "ORDER_DESIGNS", "ORDER_KEYS", "Balance", "OrderDesign", "OrderName", "Orderings", "design_balance",
           "design_record", "order_design", "orderings", "plan_orders", "unrank_permutation", "williams_orders", "williams_square"]

OrderName = Literal["rotations", "permutations", "williams", "reverse"]
ORDER_DESIGNS: tuple[str, ...] = ("rotations", "permutations", "williams", "reverse")
ORDER_KEYS: tuple[str, ...] = ("orders", "orders_cap", "orders_sample", "orders_seed")
"""The `bench:` keys a forced-choice spec carries for its ordering design (recorded in the run key
and manifest only when `orders` is not `rotations`, so a default run's record stays as it was)."""
DEFAULT_CAP = 720
"""6! — every ordering of up to six options by default; seven or more need a sample."""
MAX_CAP = 100_000
"""The largest `bench.orders_cap` (and so `bench.orders_sample`): more orderings per item and
condition than any run could score, and a bound on what a run — a dry run too — builds."""
OrderCap = Annotated[int, Ge(1), Le(MAX_CAP)]
"""A `bench.orders_cap` or `bench.orders_sample` value."""
_NUMPY_RANKS = 2 ** 63
"""Below this many orderings the sample is drawn by numpy (as it always was, so stored runs'
draws are reproduced); at or above it, where numpy's int64 overflows, by Python's `random`
over the exact integer range (22 options have 22! ≈ 1.1e21 orderings)."""

BALANCES: dict[str, str] = {
    "rotations": "every option once at every letter (the letter's main effect); not which option precedes which: "
                 "each option always follows the same one (wrapped around at A)",
    "permutations": "every option equally often at every letter and after every other option, and every higher-order "
                    "sequence effect (all orderings); a sample balances them only in expectation",
    "williams": "every option equally often at every letter and immediately after every other option (first-order "
                "carry-over); not longer sequences",
    "reverse": "the direction of the item's own order (an ordinal scale read top-down and bottom-up); with more than "
               "two options not the letter: each option sits at two letters only, so the letter prior falls back to "
               "the pooled estimators",
    "latin_square": "across items, every option equally often at every letter and after every other option, one "
                    "ordering per item; within an item nothing",
}
"""What each design balances and what it does not, as the report says it."""


@dataclass(frozen=True)
class OrderDesign:
    """A bench's ordering design, from its `bench.orders*` keys."""

    name: str = "rotations"
    """One of `ORDER_DESIGNS`."""
    cap: int = DEFAULT_CAP
    """Most orderings per item the design may present."""
    sample: int | None = None
    """Under `permutations` above the cap: how many orderings to draw (None: refuse)."""
    seed: int = 0
    """Seed of that draw."""


@dataclass(frozen=True)
class Orderings:
    """One item's orderings under a design, and whether they were sampled."""

    orders: tuple[tuple[int, ...], ...]
    sampled: bool = False


def order_design(spec: Any) -> OrderDesign:
    """The ordering design a bench spec's `orders*` fields name; `rotations` for a spec without them."""
    name = getattr(spec, "orders", "rotations")
    if name not in ORDER_DESIGNS:
        raise ProbeInputError(f"bench.orders: unknown design {name!r}; expected one of {list(ORDER_DESIGNS)}")
    return OrderDesign(name=name, cap=getattr(spec, "orders_cap", DEFAULT_CAP),
                       sample=getattr(spec, "orders_sample", None), seed=getattr(spec, "orders_seed", 0))


def orderings(k: int, design: OrderDesign) -> Orderings:
    """The orderings of an item with `k` options under `design`; refuses (one line) a design whose
    count exceeds the cap, a sample above the cap, and an unknown design."""
    if design.sample is not None and design.name != "permutations":
        raise ProbeInputError(f"bench.orders_sample={design.sample} samples orderings of bench.orders=permutations "
                              f"only; bench.orders={design.name} has a fixed set (unset bench.orders_sample)")
    if design.name == "rotations":
        out = tuple(tuple((i + r) % k for i in range(k)) for r in range(k))
    elif design.name == "williams":
        out = williams_orders(k)
    elif design.name == "reverse":
        out = (tuple(range(k)), tuple(reversed(range(k)))) if k > 1 else ((0,),)
    elif design.name == "permutations":
        return _permutations(k, design)
    else:
        raise ProbeInputError(f"bench.orders: unknown design {design.name!r}; expected one of {list(ORDER_DESIGNS)}")
    if len(out) > design.cap:
        raise ProbeInputError(f"bench.orders={design.name}: {len(out)} orderings of {k} options exceed "
                              f"bench.orders_cap={design.cap}; raise the cap")
    return Orderings(out)


def _permutations(k: int, design: OrderDesign) -> Orderings:
    total = math.factorial(k)
    if design.sample is not None and design.sample > design.cap:
        raise ProbeInputError(f"bench.orders_sample={design.sample} exceeds bench.orders_cap={design.cap}; "
                              "lower the sample or raise the cap")
    if total <= design.cap and (design.sample is None or design.sample >= total):
        return Orderings(tuple(itertools.permutations(range(k))))
    if design.sample is None:
        raise ProbeInputError(f"bench.orders=permutations: {k} options have {total} orderings, above "
                              f"bench.orders_cap={design.cap}; sample some (bench.orders_sample=N, N ≤ the cap, "
                              "seeded by bench.orders_seed) or raise the cap")
    # ranks drawn without replacement, then sorted: the sample reads in lexicographic order
    if total < _NUMPY_RANKS:
        ranks = sorted(int(r) for r in np.random.default_rng(design.seed).choice(total, size=design.sample,
                                                                                  replace=False))
    else:
        ranks = sorted(_distinct_ranks(total, design.sample, design.seed))
    return Orderings(tuple(unrank_permutation(r, k) for r in ranks), sampled=True)


def _distinct_ranks(total: int, n: int, seed: int) -> set[int]:
    """`n` distinct ranks uniform in `[0, total)`, for a `total` past int64 (`random.sample`
    needs the population's length as a C integer): drawn until `n` differ — with `n` ≤
    `MAX_CAP` and `total` ≥ 2**63 a repeat is all but impossible, so this is `n` draws."""
    rng, ranks = random.Random(seed), set[int]()
    while len(ranks) < n:
        ranks.add(rng.randrange(total))
    return ranks


def unrank_permutation(rank: int, k: int) -> tuple[int, ...]:
    """The `rank`-th permutation of 0..k-1 in lexicographic order (rank 0 = identity), by its
    factorial-base digits (Lehmer code)."""
    pool, out = list(range(k)), []
    for i in range(k - 1, -1, -1):
        digit, rank = divmod(rank, math.factorial(i))
        out.append(pool.pop(digit))
    return tuple(out)


def _williams_first_row(n: int) -> np.ndarray:
    """`0, 1, n-1, 2, n-2, 3, ...`: successive differences `+1, -2, +3, ...` (mod n)."""
    first = np.empty(n, dtype=np.int64)
    first[0] = 0
    for j in range(1, n):
        first[j] = (j + 1) // 2 if j % 2 else n - j // 2
    return first


def williams_square(n: int) -> np.ndarray:
    """Balanced (Williams) Latin square of even order ``n``, shape ``[n, n]``, dtype int.

    Row ``r`` is an ordering of the symbols ``0..n-1`` (column = position). Construction:
    the first row is ``0, 1, n-1, 2, n-2, 3, ...``, i.e. ``s_0 = 0`` and for ``j >= 1``
    ``s_j = (j + 1) // 2`` if ``j`` is odd else ``n - j // 2``; row ``r`` is
    ``(s_j + r) mod n``.

    Why it is balanced: rows are cyclic shifts, so each symbol is once per row and column.
    The successive differences of the first row are ``+1, -2, +3, -4, ..., ±(n-1)`` (mod n),
    which for even ``n`` are the ``n - 1`` distinct non-zero residues. The adjacent pair
    ``(a, b)`` has difference ``b - a``; that difference occurs at exactly one column
    boundary, and exactly one shift ``r`` maps that boundary's pair onto ``(a, b)``. So each
    ordered pair ``a != b`` is horizontally adjacent exactly once.

    Odd ``n`` raises ValueError: no single ``n x n`` square is balanced for n = 3, 5, 7
    (`williams_orders` gives the classical ``2n``-row design instead). CCD-Bench uses n = 10.
    """
    if n < 2 or n % 2:
        raise ValueError(f"williams_square needs an even order n >= 2, got n={n}")
    return (_williams_first_row(n)[None, :] + np.arange(n)[:, None]) % n


def williams_orders(k: int) -> tuple[tuple[int, ...], ...]:
    """A Williams design of `k` options: the square for even k; for odd k the cyclic shifts of the
    same first row plus each shift reversed (2k orderings). In the odd case the first row's
    differences ±1..±(k-1) hit each non-zero residue twice in total across a row and its reverse,
    so every ordered pair is adjacent exactly twice. k = 1 has the one ordering."""
    if k == 1:
        return ((0,),)
    if k % 2 == 0:
        return tuple(tuple(int(c) for c in row) for row in williams_square(k))
    rows = (_williams_first_row(k)[None, :] + np.arange(k)[:, None]) % k
    return tuple(tuple(int(c) for c in row) for row in rows) + tuple(
        tuple(int(c) for c in row[::-1]) for row in rows)


@dataclass(frozen=True)
class Balance:
    """What a set of orderings of K options balances."""

    positions: bool
    """Every option equally often at every letter."""
    carry_over: bool
    """Every option immediately after every other option equally often."""


def design_balance(orders: Sequence[Sequence[int]]) -> Balance:
    """Position and first-order carry-over balance of `orders` (each a permutation of 0..K-1)."""
    arr = np.asarray(orders, dtype=np.int64)
    k = arr.shape[1]
    at = np.zeros((k, k), dtype=np.int64)
    np.add.at(at, (arr, np.broadcast_to(np.arange(k), arr.shape)), 1)
    after = np.zeros((k, k), dtype=np.int64)
    np.add.at(after, (arr[:, :-1], arr[:, 1:]), 1)
    off = after[~np.eye(k, dtype=bool)]
    return Balance(positions=bool((at == at[0, 0]).all()), carry_over=bool(k > 1 and (off == off[0]).all()))


def design_record(design: OrderDesign, per_item: dict[int, Orderings]) -> dict[str, Any]:
    """The manifest's record of a non-default design: its name, orderings per item by option count,
    whether they were sampled (with the seed), and what they balance."""
    out: dict[str, Any] = {"design": design.name, "cap": design.cap,
                           "orderings": {str(k): len(o.orders) for k, o in sorted(per_item.items())}}
    if any(o.sampled for o in per_item.values()):
        out.update(sampled=True, sample=design.sample, seed=design.seed)
    bal = {str(k): vars(design_balance(o.orders)) for k, o in sorted(per_item.items())}
    out["balance"] = bal
    out["balances"] = BALANCES[design.name]
    return out


def plan_orders(spec: Any, sizes: Sequence[int]) -> tuple[dict[int, Orderings], dict[str, Any] | None]:
    """The orderings for every option count in `sizes` under the design `spec` names, and the
    manifest's record of it (None under the default `rotations`: a default run's record stays as
    it was). Refuses (one line, before anything is written) a design over its cap."""
    design = order_design(spec)
    per_item = {k: orderings(k, design) for k in sorted(set(sizes))}
    return per_item, None if design.name == "rotations" else design_record(design, per_item)
