"""The token ids training reads, and the batches it pads.

- `TokenStore`: token ids of many papers in two memory-mapped arrays (offsets, flat ids), written in batches, so
  training never holds all texts or all token lists in Python objects.
- `group_by_length`, `shuffle_groups`, `padding_share`: batches of papers of similar length (a batch is padded to
  its longest member, so mixing short and long papers at random spends most of the compute on padding), as
  Hugging Face's `group_by_length` does: sort within mega-batches of a seeded permutation, so the data order
  stays random between batches. `collate_pieces` splits one micro-batch's papers (a triplet's three papers
  differ in length whatever the grouping) into parts of similar length that the encoder runs one after the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from citeflow.errors import CiteflowError
from citeflow.models.encoder.model import paper_text


class TokenStore:
    """Token ids of papers, row i = the i-th corpus id of `ids` (sorted): `offsets.npy` and `tokens.npy`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.ids = np.load(self.folder / "ids.npy", mmap_mode="r")
        self.offsets = np.load(self.folder / "offsets.npy", mmap_mode="r")
        self.tokens = np.load(self.folder / "tokens.npy", mmap_mode="r")

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, corpus_ids: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.ids, corpus_ids)
        bad = (at >= len(self.ids)) | (np.asarray(self.ids)[np.minimum(at, len(self.ids) - 1)] != corpus_ids)
        if bad.any():
            raise CiteflowError(
                f"{int(bad.sum())} triplet papers have no text (e.g. corpus id "
                f"{int(corpus_ids[bad][0])}); training_texts and triplets disagree"
            )
        return at

    def get(self, row: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[row] : self.offsets[row + 1]])

    @staticmethod
    def write(
        folder: Path,
        batches: Iterator[tuple[np.ndarray, list[str | None], list[str | None]]],
        tokenizer,
        max_length: int,
        total_rows: int,
    ) -> TokenStore:
        """Tokenise (ids, titles, abstracts) batches into memory-mapped arrays, written via a temp folder."""
        folder = Path(folder)
        tmp = folder.with_name(folder.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        ids_out = np.lib.format.open_memmap(tmp / "ids.npy", mode="w+", dtype=np.int64, shape=(total_rows,))
        offsets = np.lib.format.open_memmap(tmp / "offsets.npy", mode="w+", dtype=np.int64, shape=(total_rows + 1,))
        offsets[0] = 0
        chunks_path = tmp / "tokens.bin"
        row = 0
        with open(chunks_path, "wb") as fh:
            for ids, titles, abstracts in batches:
                texts = [paper_text(t, a, tokenizer.sep_token) for t, a in zip(titles, abstracts, strict=True)]
                encoded = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
                lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
                flat = np.fromiter((t for e in encoded for t in e), dtype=np.int32, count=int(lengths.sum()))
                fh.write(flat.tobytes())
                ids_out[row : row + len(ids)] = ids
                offsets[row + 1 : row + 1 + len(ids)] = offsets[row] + np.cumsum(lengths)
                row += len(ids)
        if row != total_rows:
            raise RuntimeError(f"tokenised {row} papers, expected {total_rows}")
        if total_rows and not (np.diff(ids_out) > 0).all():
            raise RuntimeError("token store ids must be sorted and distinct")
        flat = np.memmap(chunks_path, dtype=np.int32, mode="r") if offsets[-1] else np.zeros(0, np.int32)
        tokens = np.lib.format.open_memmap(tmp / "tokens.npy", mode="w+", dtype=np.int32, shape=(int(offsets[-1]),))
        tokens[:] = flat
        tokens.flush()
        ids_out.flush()
        offsets.flush()
        del flat, tokens, ids_out, offsets
        os.remove(chunks_path)
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        os.replace(tmp, folder)
        return TokenStore(folder)


def collate(sequences: list[np.ndarray], pad_id: int):
    """Pad token id arrays to the longest: (input_ids, attention_mask) int64 tensors."""
    import torch

    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, : len(s)] = torch.from_numpy(s.astype(np.int64))
        mask[i, : len(s)] = 1
    return ids, mask


def collate_pieces(
    store: TokenStore, rows: np.ndarray, pad_id: int, pieces: int, multiple: int = 1, limit: int | None = None
):
    """Token-store rows collated in `pieces` parts of similar length (`length_pieces`), each padded to a
    multiple of `multiple` tokens, at most `limit` (`collate_rows`).

    Returns ([(input_ids, attention_mask) per part], inverse): concatenating the parts' outputs and taking
    rows `inverse` restores the order of `rows`.
    """
    import torch

    offsets = np.asarray(store.offsets)
    parts = length_pieces(offsets[rows + 1] - offsets[rows], pieces)
    inverse = np.argsort(np.concatenate(parts), kind="stable")
    return [collate_rows(store, rows[part], pad_id, multiple, limit) for part in parts], torch.from_numpy(inverse)


def padded_length(longest: int, multiple: int = 1, limit: int | None = None) -> int:
    """The width a batch whose longest paper has `longest` tokens is padded to: rounded up to a multiple of
    `multiple`, but never beyond `limit` (the model's positions) nor below `longest`."""
    rounded = -(-longest // multiple) * multiple
    return max(longest, min(rounded, limit)) if limit else rounded


def collate_rows(store: TokenStore, rows: np.ndarray, pad_id: int, multiple: int = 1, limit: int | None = None):
    """`collate` of token-store rows, gathered with one vectorised read instead of a Python loop per paper;
    the batch is padded to its longest paper rounded up to a multiple of `multiple` tokens (`pad_to_multiple`:
    a GPU runs a bounded set of shapes much faster than a new shape each step), but never beyond `limit` (the
    model's positions) nor below its longest paper."""
    import torch

    starts = np.asarray(store.offsets[rows], dtype=np.int64)
    lengths = np.asarray(store.offsets[rows + 1], dtype=np.int64) - starts
    longest = int(lengths.max()) if len(rows) else 0
    longest = padded_length(longest, multiple, limit)
    position = np.arange(longest, dtype=np.int64)
    real = position[None, :] < lengths[:, None]
    ids = np.full((len(rows), longest), pad_id, dtype=np.int64)
    ids[real] = store.tokens[(starts[:, None] + position[None, :])[real]]
    return torch.from_numpy(ids), torch.from_numpy(real.astype(np.int64))


def group_by_length(order: np.ndarray, lengths: np.ndarray, batch: int, group: int) -> np.ndarray:
    """`order` with each mega-batch of `group` x `batch` consecutive entries sorted by length, longest first.

    `lengths[i]` is entry i's length. Only whole batches are regrouped: the last `len(order) % batch` entries
    (those an epoch drops) stay where they are, so the same entries are dropped as without grouping. The sort
    is stable, so equal lengths keep their permuted order.
    """
    order = np.asarray(order)
    whole = len(order) - len(order) % batch
    out = order.copy()
    span = group * batch
    for lo in range(0, whole, span):
        chunk = order[lo : min(lo + span, whole)]
        out[lo : lo + len(chunk)] = chunk[np.argsort(-np.asarray(lengths)[chunk], kind="stable")]
    return out


def shuffle_groups(order: np.ndarray, batch: int, group: int, rng: np.random.Generator) -> np.ndarray:
    """The batches of each mega-batch (see `group_by_length`) in a random order, each batch kept whole.

    Without this every mega-batch would run from its longest batch to its shortest, tying length to position.
    """
    order = np.asarray(order)
    whole = len(order) - len(order) % batch
    out = order.copy()
    span = group * batch
    for lo in range(0, whole, span):
        batches = order[lo : min(lo + span, whole)].reshape(-1, batch)
        out[lo : lo + batches.size] = batches[rng.permutation(len(batches))].ravel()
    return out


def length_pieces(lengths: np.ndarray, pieces: int) -> list[np.ndarray]:
    """Positions of `lengths` sorted by length (stable) and split into `pieces` near-equal parts.

    A micro-batch's papers run through the encoder in these parts, each padded to its own longest paper.
    """
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [part for part in np.array_split(order, min(pieces, len(order))) if len(part)]


def padding_share(
    lengths: np.ndarray, micro_batches: np.ndarray, pieces: int = 1, multiple: int = 1, limit: int | None = None
) -> float:
    """Share of padding tokens when each micro-batch runs in `pieces` forward passes (`length_pieces`),
    each padded as `collate_rows` pads it (`padded_length`).

    `lengths`: (items, k) token counts (k sequences per item, e.g. a triplet's three papers);
    `micro_batches`: (batches, size) item indices, one row per micro-batch.
    """
    real = padded = 0.0
    for batch in np.asarray(lengths)[micro_batches].reshape(len(micro_batches), -1):
        real += float(batch.sum())
        padded += float(
            sum(
                padded_length(int(batch[part].max()), multiple, limit) * len(part)
                for part in length_pieces(batch, pieces)
            )
        )
    return 1 - real / padded if padded else 0.0
