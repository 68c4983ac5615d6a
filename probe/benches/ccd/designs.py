"""Option-order designs of CCD-Bench (docs/benchmarks/ccd.md) and their balance score.

The paper presents each dilemma's ten cluster options in an order taken from a per-domain
("stratified") balanced Latin square, so that every cluster appears equally often at every
letter and every cluster precedes every other equally often. `latin_square_orders` builds
those orders; `balance_score` measures how close a set of orders comes to that ideal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from probe.benches.orders import williams_square

__all__ = ["latin_square_orders", "balance_score"]


def latin_square_orders(domains: Sequence[str], n_options: int = 10,
                        seed: int = 42) -> list[tuple[int, ...]]:
    """Display order of every item under the stratified Latin-square design (docs/benchmarks/ccd.md).

    ``domains[q]`` is item q's domain. Returns ``orders[q]`` with ``orders[q][i]`` = the
    canonical option (cluster) index shown at letter ``i``.

    Per domain ``d``: ``perm_d = rng.permutation(n_options)`` with
    ``rng = np.random.default_rng(seed)``, one draw per distinct domain in *sorted* order;
    the k-th item of ``d`` (k from 0, in item order within ``d``) gets
    ``order[i] = perm_d[W[k mod n_options, i]]`` where ``W = williams_square(n_options)``.
    Relabelling symbols keeps a Williams square balanced, so each domain's block of
    ``n_options`` consecutive items is itself balanced. Because the draws follow sorted
    domain names, one domain's orders depend only on the *set* of domains present, never on
    how the other domains' items are interleaved with it.
    """
    square = williams_square(n_options)
    rng = np.random.default_rng(seed)
    # Sorted, not first-seen, order: reordering items must not change any domain's relabelling.
    perms = {d: rng.permutation(n_options) for d in sorted(set(domains))}
    seen: dict[str, int] = {}
    orders: list[tuple[int, ...]] = []
    for d in domains:
        k = seen.get(d, 0)
        seen[d] = k + 1
        row = perms[d][square[k % n_options]]
        orders.append(tuple(int(c) for c in row))
    return orders


def balance_score(orders: Sequence[Sequence[int]], n: int = 10) -> float:
    """Latin-square balance score BS in percent (docs/benchmarks/ccd.md, paper eq. 2).

    With ``Q = len(orders)`` and ``A[c, p]`` = number of items showing cluster ``c`` at
    position ``p``::

        Delta = sum_{c,p} |A[c, p] - Q/n|
        BS    = 100 * (1 - Delta / (2 * (n - 1) / n * n * Q))   # n = 10: 1.8 * 10 * Q

    The denominator ``2 (n - 1) Q`` is the largest possible Delta: every row of A sums to
    Q, so a row's positive excess is at most ``Q - Q/n`` and its deficit equals its excess;
    summing ``2 (Q - Q/n)`` over n rows gives ``2 (n - 1) Q``, reached exactly when every
    cluster always sits at one position (e.g. all items share one order). Hence BS lies in
    [0, 100]: 100 = each cluster exactly Q/n times at each position, 0 = worst case.

    Raises ValueError if ``orders`` is empty or an order is not a permutation of 0..n-1.
    """
    if n < 1:
        raise ValueError(f"balance_score needs n >= 1, got n={n}")
    if len(orders) == 0:
        raise ValueError("balance_score needs at least one order, got an empty list")
    expected = list(range(n))
    for q, order in enumerate(orders):
        # Check each item on its own so the message names the offending item.
        try:
            ok = sorted(order) == expected  # equal to 0..n-1 as a multiset, length included
        except TypeError:  # unorderable mix, e.g. ints and strings
            ok = False
        if not ok:
            raise ValueError(
                f"order of item {q} is not a permutation of 0..{n - 1}: found {order!r}")
    arr = np.asarray(orders, dtype=np.int64)  # [Q, n]: arr[q, p] = cluster at position p
    q_items = arr.shape[0]
    counts = np.zeros((n, n), dtype=np.int64)
    np.add.at(counts, (arr, np.broadcast_to(np.arange(n), arr.shape)), 1)
    # Scale by n to stay in integers (n * Delta = sum |n A - Q|): the worst case then gives
    # a ratio of exactly 1.0 and BS = 0.0, not -4e-14 from float round-off.
    n_delta = int(np.abs(n * counts - q_items).sum())
    n_worst = 2 * (n - 1) * n * q_items  # n * [2 (n-1)/n * n * Q]
    if n_worst == 0:  # n == 1: a single option is trivially balanced
        return 100.0
    return 100.0 * (1.0 - n_delta / n_worst)
