"""Vectorised helpers of the generator: independent random streams, counts and draws, CSR lists, string columns.

Pure functions of numpy / pyarrow arrays (no files).
"""

from __future__ import annotations

import binascii
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

LARGE_STRING = pa.large_string()


def random_stream(seed: int, stream: str, *extra: int) -> np.random.Generator:
    """An independent random stream per purpose: adding draws to one never shifts another."""
    return np.random.default_rng([seed, zlib.crc32(stream.encode()), *extra])


def rate_count(rate: float, n: int) -> int:
    """round(rate * n), but at least 1 for a positive rate, so that small corpora get every kind of dirt."""
    if rate <= 0 or n <= 0:
        return 0
    return int(min(n, max(1, round(rate * n))))


def pick(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """k distinct indices of range(n), sorted."""
    if k <= 0 or n <= 0:
        return np.empty(0, dtype=np.int64)
    return np.sort(rng.choice(n, size=min(k, n), replace=False)).astype(np.int64)


def index_mask(n: int, idx: np.ndarray) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    m[idx] = True
    return m


def unique_ints(rng: np.random.Generator, n: int, low: int, high: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """n distinct int64 in [low, high), none in `exclude`, in random order; a ValueError where the range holds
    fewer than n (drawing would never end)."""
    if high - low < n:
        raise ValueError(f"{n:,} distinct ints do not fit in [{low:,}, {high:,})")
    got = np.empty(0, dtype=np.int64)
    while len(got) < n:
        draw = rng.integers(low, high, size=int((n - len(got)) * 1.1) + 16, dtype=np.int64)
        got = np.unique(np.concatenate([got, draw]))
        if exclude is not None and len(exclude):
            got = got[~np.isin(got, exclude)]
    return rng.permutation(got)[:n]


def make_shas(rng: np.random.Generator, n: int) -> pa.LargeStringArray:
    """n random 40-character lowercase hex strings (160 random bits each)."""
    hexed = binascii.hexlify(rng.bytes(20 * n))
    offsets = np.arange(0, 40 * n + 1, 40, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(hexed))


def csr_ptr(sorted_groups: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointer of `sorted_groups` (values in range(n), sorted)."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(sorted_groups, minlength=n), out=ptr[1:])
    return ptr


def csr_gather(
    ptr: np.ndarray, values: np.ndarray, rows: np.ndarray, cap: int | np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of the CSR rows `rows` (the first `cap` of each: one cap, or one per row), concatenated."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = ptr[rows]
    lens = ptr[rows + 1] - starts
    if cap is not None:
        lens = np.minimum(lens, cap)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    pos = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], lens)
    return offsets, values[pos]


def csr_owner(offsets: np.ndarray) -> np.ndarray:
    """For CSR offsets: the row of each value."""
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def rank_in_groups(sorted_groups: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run of equal values."""
    n = len(sorted_groups)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    return np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.r_[starts, n]))


def sample_per_group(rng: np.random.Generator, groups: np.ndarray, k: int) -> np.ndarray:
    """Indices of up to k random members of each group, ordered by group."""
    order = np.lexsort((rng.random(len(groups)), groups))
    return order[rank_in_groups(groups[order]) < k]


def weighted_sample(rng: np.random.Generator, weights: np.ndarray, k: int) -> np.ndarray:
    """k distinct indices drawn with probability proportional to `weights` (Efraimidis-Spirakis keys)."""
    k = min(k, len(weights))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    keys = np.log(rng.random(len(weights))) / weights
    top = np.argpartition(-keys, k - 1)[:k]
    return top[np.argsort(-keys[top], kind="stable")].astype(np.int64)


def lengths_to_offsets(lengths: np.ndarray) -> np.ndarray:
    """CSR offsets of consecutive runs of these lengths: 0, l0, l0 + l1, ..."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def int_strings(values: np.ndarray) -> pa.Array:
    """Integers as decimal strings."""
    return pc.cast(pa.array(values, pa.int64()), pa.string())


def concat_strings(*parts: str | pa.Array) -> pa.Array:
    """Element-wise concatenation; a str is repeated for every row. Null if any part is null."""
    args = [
        pa.scalar(x, LARGE_STRING) if isinstance(x, str) else (x if x.type == LARGE_STRING else x.cast(LARGE_STRING))
        for x in parts
    ]
    return pc.binary_join_element_wise(*args, pa.scalar("", LARGE_STRING))
