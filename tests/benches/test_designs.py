"""CCD-Bench option-order designs (probe.designs) against properties and hand-computed values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from probe.benches.ccd.designs import balance_score, latin_square_orders
from probe.benches.orders import williams_square

CCD_DOMAINS = ["Arts", "Education", "Family", "Wellness", "Work", "Scientific", "Lifestyle"]


def assert_williams(sq: np.ndarray, n: int) -> None:
    assert sq.shape == (n, n)
    symbols = list(range(n))
    for r in range(n):
        assert sorted(sq[r].tolist()) == symbols, f"row {r}"
    for c in range(n):
        assert sorted(sq[:, c].tolist()) == symbols, f"column {c}"
    pairs = [(int(row[i]), int(row[i + 1])) for row in sq for i in range(n - 1)]
    # n rows x (n-1) boundaries = n(n-1) pairs; all distinct and a != b => each ordered pair once.
    assert len(pairs) == n * (n - 1)
    assert sorted(pairs) == [(a, b) for a, b in itertools.product(symbols, symbols) if a != b]


# --- williams_square --------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 4, 6, 8, 10])
def test_williams_property(n: int) -> None:
    assert_williams(williams_square(n), n)


def test_williams_n4_by_hand() -> None:
    # First row 0, 1, n-1=3, 2; rows are +r mod 4. Adjacent pairs per row:
    #   r0 0 1 3 2 -> 01 13 32
    #   r1 1 2 0 3 -> 12 20 03
    #   r2 2 3 1 0 -> 23 31 10
    #   r3 3 0 2 1 -> 30 02 21
    # The 12 pairs are exactly the 12 ordered pairs a != b of {0,1,2,3}: 01 02 03 10 12 13
    # 20 21 23 30 31 32, each once; each column (0123, 1230, 3102, 2301) is a permutation.
    expected = np.array([[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]])
    np.testing.assert_array_equal(williams_square(4), expected)


@pytest.mark.parametrize("n", [-2, 0, 1, 3, 5, 9])
def test_williams_rejects_odd_or_small(n: int) -> None:
    with pytest.raises(ValueError, match="even order"):
        williams_square(n)


# --- latin_square_orders ----------------------------------------------------------------

def test_one_domain_block_is_latin_and_balanced() -> None:
    orders = latin_square_orders(["Work"] * 10)
    sq = np.array(orders)
    # Relabelling keeps the square a Williams square: rows, columns, adjacent pairs.
    assert_williams(sq, 10)
    assert all(isinstance(c, int) for o in orders for c in o)


def test_relabelling_matches_definition() -> None:
    # One domain -> exactly one draw from the seeded RNG; order[i] = perm[W[k mod 10, i]].
    perm = np.random.default_rng(42).permutation(10)
    w = williams_square(10)
    orders = latin_square_orders(["Arts"] * 12)
    for k, order in enumerate(orders):
        assert order == tuple(perm[w[k % 10]].tolist())


def test_other_even_sizes_and_odd_rejected() -> None:
    sq = np.array(latin_square_orders(["Arts"] * 4, n_options=4))
    assert_williams(sq, 4)
    with pytest.raises(ValueError, match="even order"):
        latin_square_orders(["Arts"], n_options=5)


def test_deterministic_and_seed_dependent() -> None:
    doms = ["Arts"] * 10
    assert latin_square_orders(doms) == latin_square_orders(doms, seed=42)
    assert latin_square_orders(doms, seed=42) != latin_square_orders(doms, seed=7)


def test_row_is_k_mod_n() -> None:
    orders = latin_square_orders(["Family"] * 25)
    assert orders[0] == orders[10] == orders[20]
    assert orders[3] == orders[13] == orders[23]
    assert len(set(orders[:10])) == 10


def test_interleaved_domains_do_not_disturb_each_other() -> None:
    blocked = ["Arts"] * 12 + ["Work"] * 12
    rng = np.random.default_rng(3)
    mixed = list(rng.permutation(blocked))
    a, b = latin_square_orders(blocked), latin_square_orders(mixed)
    for dom in ("Arts", "Work"):
        seq_a = [o for d, o in zip(blocked, a) if d == dom]
        seq_b = [o for d, o in zip(mixed, b) if d == dom]
        assert seq_a == seq_b
    # And the two domains get different relabellings (independent draws).
    assert a[0] != a[12]


# --- balance_score ----------------------------------------------------------------------

def test_bs_perfect_for_full_blocks() -> None:
    assert balance_score(latin_square_orders(["Work"] * 10_000)) == pytest.approx(100.0)


def test_bs_ccd_like_corpus() -> None:
    # 2,182 items over the 7 CCD domains in a seeded random proportion. Only each domain's
    # last partial block (< 10 rows) is unbalanced, so BS stays close to 100 (paper: ~99.8%).
    rng = np.random.default_rng(0)
    share = rng.dirichlet(np.full(7, 5.0))  # concentration 5: uneven, but no domain vanishes
    doms = [str(d) for d in rng.choice(CCD_DOMAINS, size=2182, p=share)]
    assert set(doms) == set(CCD_DOMAINS)
    bs = balance_score(latin_square_orders(doms))
    assert 99.0 <= bs < 100.0


def test_bs_hand_n3() -> None:
    # n=3, Q=2: orders (0,1,2) and (1,2,0). A[cluster, position]:
    #   c0: [1, 0, 1]   c1: [1, 1, 0]   c2: [0, 1, 1]
    # Q/n = 2/3; six cells |1 - 2/3| = 1/3, three cells |0 - 2/3| = 2/3 -> Delta = 2 + 2 = 4.
    # Denominator 2(n-1)Q = 2*2*2 = 8 -> BS = 100 (1 - 4/8) = 50.
    assert balance_score([(0, 1, 2), (1, 2, 0)], n=3) == pytest.approx(50.0)


def test_bs_hand_n2() -> None:
    # n=2, Q=3: (0,1), (0,1), (1,0). A: c0 [2, 1], c1 [1, 2]; Q/n = 1.5; Delta = 4 * 0.5 = 2.
    # Denominator 2(n-1)Q = 6 -> BS = 100 (1 - 2/6) = 66.666...
    assert balance_score([[0, 1], [0, 1], [1, 0]], n=2) == pytest.approx(200 / 3)


@pytest.mark.parametrize("q", [1, 7, 100])
def test_bs_identical_orders_is_zero(q: int) -> None:
    # All Q items share one order -> A = Q * (permutation matrix): n cells of Q, n^2-n of 0.
    # Delta = n (Q - Q/n) + (n^2 - n) Q/n = 2 (n-1) Q = the denominator exactly -> BS = 0,
    # the formula's minimum (no A with row/column sums Q has a larger Delta; see docstring).
    order = (3, 1, 4, 0, 5, 9, 2, 6, 8, 7)
    assert balance_score([order] * q) == 0.0  # exact: computed in integers


def test_bs_never_negative_on_random_orders() -> None:
    rng = np.random.default_rng(1)
    for q in (1, 2, 5, 30):
        orders = [rng.permutation(10) for _ in range(q)]
        assert 0.0 <= balance_score(orders) <= 100.0


def test_bs_accepts_numpy_orders() -> None:
    orders = np.array(latin_square_orders(["Arts"] * 10))
    assert balance_score(orders) == pytest.approx(100.0)


def test_bs_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        balance_score([])
    good = tuple(range(10))
    with pytest.raises(ValueError, match=r"item 1 .*found \(0, 0, 2"):
        balance_score([good, (0, 0, 2, 3, 4, 5, 6, 7, 8, 9)])
    with pytest.raises(ValueError, match=r"item 2 .*found \(0, 1, 2\)"):
        balance_score([good, good, (0, 1, 2)])  # too short
    with pytest.raises(ValueError, match=r"item 0 .*found \[1, 2, 3"):
        balance_score([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])  # off by one
    with pytest.raises(ValueError, match="item 0"):
        balance_score([["a", 1]], n=2)  # unorderable mix
