"""SciDocs' recommendation task (recomm): a small click ranker trained on the embeddings, scored on test clicks.

    from citeflow.evaluation.recomm import evaluate
    rows = evaluate(Path("scidocs"), embeddings, split="test")   # ("recomm", "adj-ndcg") and ("recomm", "adj-p@1")

Reads `recomm/{train,val,test}.csv`, `recomm/propensity_scores.json` and `paper_metadata_recomm.json` of a SciDocs
folder (original layout); writes nothing. A PyTorch port of allenai/scidocs @ ebf239d:
- `scidocs/recommender/simclick_triplet_sampler.py`: each click line `query,clicked,"other1,other2,..."` (after a
  header line) gives (query, clicked, other) training pairs for the first `max_results_per_query` others that are
  not the clicked paper;
- `scidocs/recommender/simclick_data_reader.py`: 11 numeric features per (query, candidate) pair, in this order:
  author Jaccard, position, title-token Jaccard, cosine of the two embeddings (a missing embedding is a zero
  vector, cosine 0), cited-by Jaccard, reference Jaccard, candidate cites query, query cites candidate, oldness
  clip((2020 - year) / 20), relative oldness clip((query year - candidate year) / 20), log(1 + cited-by) / 10.
  The reader sets the position field to its value / 10 and then overwrites it with 0, so the position feature is
  always 0; kept;
- `scidocs/recommender/simpaper_recommender.py` with the AllenNLP config the reference trains with
  (`train_similar_papers_model.json`, in the repository's history at b75344d before it moved to the data bucket):
  `encode_title` and `project_query` false, so the score is a feed-forward net over the 11 features only
  (11 -> 50 ReLU, dropout 0.4 -> 1 sigmoid); margin ranking loss, margin 0.1, divided by the propensity at the
  clicked position — which, the position field being 0, is always the last propensity (`round(0 * 10 - 1)` indexes
  -1); kept; seeds 7, batch 128 shuffled, Adadelta (rho 0.95), gradient values clipped at 5, 5 epochs, the epoch
  with the lowest validation loss kept (AllenNLP's default `-loss`; for `split="val"` the reference trains without
  validation and evaluates the last epoch on val);
- `scidocs/recomm_click_eval.py` (`evaluate_ranking_performance`, `get_recomm_metrics`): per test click,
  ranked_above = other candidates scored above the clicked one, ties counting 1/2; nDCG = 1 / log2(2 +
  ranked_above), P@1 = [ranked_above == 0]; the Adj- versions weight each click by 1 / propensity[clicked position]
  with the propensities rescaled to mean 1 (float32, accumulated in float32 as the reference's torch tensors are);
  Adj-nDCG and Adj-P@1 x 100 are SciDocs' numbers.
Deviations, named: titles are tokenized by a regex (words, single punctuation marks), not spaCy (the title feature
is only a Jaccard of token sets); a click whose clicked paper is not among its candidates, which makes the reference
crash, is skipped and counted. The reference notes recomm is not reproducible across PyTorch builds; this port is
seeded and deterministic on CPU, and runs on CUDA when present (`device`).
"""

from __future__ import annotations

import csv
import json
import logging
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from citeflow.evaluation.metrics import score_row

log = logging.getLogger("citeflow")

FEATURES = 11
BLANK = "<blank>"
TOKEN = re.compile(r"\w+|[^\w\s]")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True, kw_only=True)
class RecommConfig:
    """The reference's training settings (`train_similar_papers_model.json`); change them only to experiment."""

    seed: int = field(default=7, metadata=_help("random, numpy and torch seed (the reference config: 7)"))
    epochs: int = field(default=5, metadata=_help("training epochs (reference: 5)"))
    batch_size: int = field(default=128, metadata=_help("pairs per batch, shuffled each epoch (reference: 128)"))
    max_results_per_query: int = field(default=10, metadata=_help("training pairs per click line (reference: 10)"))
    hidden: int = field(default=50, metadata=_help("hidden units of the feed-forward scorer (reference: 50)"))
    dropout: float = field(default=0.4, metadata=_help("dropout after the hidden layer (reference: 0.4)"))
    margin: float = field(default=0.1, metadata=_help("margin of the ranking loss (reference: 0.1)"))
    grad_clipping: float = field(default=5.0, metadata=_help("gradient values clipped to +-this (reference: 5.0)"))
    rho: float = field(default=0.95, metadata=_help("Adadelta's rho (reference: 0.95; lr 1.0, eps 1e-6)"))
    device: str = field(default="auto", metadata=_help("auto (CUDA when present, else CPU), cpu or cuda"))

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.max_results_per_query < 1 or self.hidden < 1:
            raise ValueError("recomm: epochs, batch_size, max_results_per_query and hidden must be at least 1")


def read_clicks(path: Path) -> tuple[list[tuple[str, str, list[str], int]], int]:
    """((query, clicked, candidates, clicked position 1-based) per line after the header, lines skipped)."""
    clicks, skipped = [], 0
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()[1:]
    for line in lines:
        if not line.strip():
            continue
        fields = next(csv.reader([line], delimiter=",", quotechar='"'))
        if len(fields) != 3:
            skipped += 1
            continue
        query, clicked, others = fields
        candidates = others.strip().split(",")
        if clicked not in candidates:
            skipped += 1
            continue
        clicks.append((query, clicked, candidates, candidates.index(clicked) + 1))
    return clicks, skipped


def _jaccard(a, b) -> float:
    union = set(a) | set(b)
    return len(set(a) & set(b)) / len(union) if union else 0.0


def _title_tokens(papers: Mapping[str, dict], pid: str) -> list[str]:
    title = (papers.get(pid) or {}).get("title") or BLANK
    return TOKEN.findall(title) or [BLANK]


class Features:
    """The reader's static features of (query, candidate) pairs; the cosine is computed in float32 by torch."""

    def __init__(self, papers: Mapping[str, dict], embeddings: Mapping[str, np.ndarray]):
        self.papers = papers
        self.embeddings = embeddings
        self.dim = len(next(iter(embeddings.values())))

    def _overlap(self, a: str, b: str, key: str) -> float:
        if a not in self.papers or b not in self.papers:
            return 0.0
        return _jaccard(self.papers[a].get(key) or [], self.papers[b].get(key) or [])

    def _cites(self, source: str, candidate: str) -> float:
        """1 when the candidate cites the source, by the source's cited_by or the candidate's references."""
        cited = source in self.papers and candidate in (self.papers[source].get("cited_by") or [])
        cites = candidate in self.papers and source in (self.papers[candidate].get("references") or [])
        return float(cited or cites)

    def _year(self, pid: str) -> float | None:
        try:
            year = (self.papers.get(pid) or {}).get("year")
            return None if year is None else float(year)
        except (TypeError, ValueError):
            return None

    def static(self, query: str, candidate: str) -> list[float]:
        """The 11 features with the cosine slot (index 3) left at 0."""
        q_title, c_title = _title_tokens(self.papers, query), _title_tokens(self.papers, candidate)
        both_blank = q_title == [BLANK] and c_title == [BLANK]
        year_q, year_c = self._year(query), self._year(candidate)
        known = candidate in self.papers
        oldness = max(-1.0, min(1.0, (2020.0 - year_c) / 20.0)) if known and year_c is not None else 0.0
        relative = (
            max(-1.0, min(1.0, (year_q - year_c) / 20.0))
            if query in self.papers and known and year_q is not None and year_c is not None
            else 0.0
        )
        citations = math.log(len(set(self.papers[candidate].get("cited_by") or [])) + 1) / 10.0 if known else 0.0
        return [
            self._overlap(query, candidate, "authors"),
            0.0,  # position: the reader overwrites it with 0
            0.0 if both_blank else _jaccard(q_title, c_title),
            0.0,  # cosine, filled by `matrix`
            self._overlap(query, candidate, "cited_by"),
            self._overlap(query, candidate, "references"),
            self._cites(query, candidate),
            self._cites(candidate, query),
            oldness,
            relative,
            citations,
        ]

    def vector(self, pid: str) -> np.ndarray:
        vector = self.embeddings.get(pid)
        return np.zeros(self.dim, dtype=np.float32) if vector is None else np.asarray(vector, dtype=np.float32)

    def matrix(self, pairs: list[tuple[str, str]]):
        """(pairs x 11) float32 torch tensor."""
        import torch

        rows = torch.tensor([self.static(q, c) for q, c in pairs], dtype=torch.float32).reshape(len(pairs), FEATURES)
        if pairs:
            queries = torch.from_numpy(np.stack([self.vector(q) for q, _ in pairs]))
            candidates = torch.from_numpy(np.stack([self.vector(c) for _, c in pairs]))
            rows[:, 3] = torch.nn.functional.cosine_similarity(queries, candidates, dim=1)
        return rows


def training_pairs(clicks, limit: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(query, clicked) and (query, other) pairs as the triplet sampler yields them."""
    positives, negatives = [], []
    for query, clicked, candidates, _ in clicks:
        count = 0
        for other in candidates:
            if other != clicked:
                positives.append((query, clicked))
                negatives.append((query, other))
                count += 1
            if count == limit:
                break
    return positives, negatives


def _scorer(config: RecommConfig):
    from torch import nn

    return nn.Sequential(
        nn.Linear(FEATURES, config.hidden),
        nn.ReLU(),
        nn.Dropout(config.dropout),
        nn.Linear(config.hidden, 1),
        nn.Sigmoid(),
    )


def train(train_pairs, val_pairs, propensity, config: RecommConfig, device):
    """The scorer after `epochs` of Adadelta, with the weights of the epoch of lowest validation loss."""
    import torch

    def loss_of(model, pos, neg):
        # MarginRankingLoss(pos, neg, 1) per pair, / the propensity the reference indexes with the zeroed position
        hinge = torch.clamp(-(model(pos) - model(neg)) + config.margin, min=0.0)
        return (hinge / propensity[-1]).mean()

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(config.seed)
        order = random.Random(config.seed)
        model = _scorer(config).to(device)
        optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=config.rho, eps=1e-6)
        pos, neg = (t.to(device) for t in train_pairs)
        best, best_loss, history = None, math.inf, []
        for epoch in range(config.epochs):
            model.train()
            indices = list(range(len(pos)))
            order.shuffle(indices)
            for start in range(0, len(indices), config.batch_size):
                batch = torch.tensor(indices[start : start + config.batch_size], device=device)
                optimizer.zero_grad()
                loss = loss_of(model, pos[batch], neg[batch])
                loss.backward()
                torch.nn.utils.clip_grad_value_(model.parameters(), config.grad_clipping)
                optimizer.step()
            if val_pairs is None:
                best = {k: v.detach().clone() for k, v in model.state_dict().items()}
                history.append({"epoch": epoch})
                continue
            model.eval()
            with torch.no_grad():
                v_pos, v_neg = (t.to(device) for t in val_pairs)
                losses = [
                    loss_of(model, v_pos[s : s + config.batch_size], v_neg[s : s + config.batch_size]).item()
                    for s in range(0, len(v_pos), config.batch_size)
                ]
            val_loss = sum(losses) / len(losses) if losses else math.inf
            history.append({"epoch": epoch, "val_loss": val_loss})
            if best is None or val_loss < best_loss:
                best, best_loss = {k: v.detach().clone() for k, v in model.state_dict().items()}, val_loss
        assert best is not None  # set in the first epoch (RecommConfig: epochs >= 1)
        model.load_state_dict(best)
        model.eval()
    return model, history


def click_metrics(ranked: list[tuple[float, int]], propensity: np.ndarray) -> dict[str, float]:
    """The reference's metrics from (ranked_above, clicked position) per click; `propensity` as in the json."""
    scores = np.asarray(propensity, dtype=np.float32)
    scores = scores * np.float32(len(scores)) / np.float32(scores.sum(dtype=np.float32))
    ndcg = mrr = p1 = 0.0
    adj_total = adj_ndcg = adj_mrr = adj_p1 = np.float32(0.0)
    for above, position in ranked:
        adj = np.float32(1.0) / scores[position - 1]
        gain = 1 / math.log2(2 + above)
        ndcg += gain
        mrr += 1 / (1 + above)
        p1 += 1 if above == 0 else 0
        adj_total += adj
        adj_ndcg += adj * np.float32(gain)
        adj_mrr += adj * np.float32(1 / (1 + above))
        adj_p1 += adj * np.float32(1 if above == 0 else 0)
    n = len(ranked)
    return {
        "ndcg": ndcg / n,
        "mrr": mrr / n,
        "p@1": p1 / n,
        "adj-ndcg": float(adj_ndcg / adj_total),
        "adj-mrr": float(adj_mrr / adj_total),
        "adj-p@1": float(adj_p1 / adj_total),
    }


def ranked_above(clicked_score: float, other_scores) -> float:
    """Other candidates scored above the clicked one; a tie counts 1/2."""
    return sum(1.0 for s in other_scores if s > clicked_score) + sum(0.5 for s in other_scores if s == clicked_score)


def _rows(split, values, n, missing, status="ok", reason="", details=None):
    return [
        score_row(
            "recomm", split, m, values.get(m), n=n, missing=missing, status=status, reason=reason, details=details
        )
        for m in ("adj-ndcg", "adj-p@1")
    ]


def evaluate(
    root: Path, embeddings: Mapping[str, np.ndarray], *, split: str = "test", config: RecommConfig | None = None
) -> list[dict[str, Any]]:
    import torch

    config = config or RecommConfig()
    folder = Path(root) / "recomm"
    needed = [folder / f"{s}.csv" for s in ("train", "val", "test")] + [
        folder / "propensity_scores.json",
        Path(root) / "paper_metadata_recomm.json",
    ]
    absent = [str(p.relative_to(root)) for p in needed if not p.is_file()]
    if absent:
        return _rows(split, {}, 0, 0, status="missing", reason=f"{', '.join(absent)} absent")
    if config.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(config.device)
    propensity = json.loads((folder / "propensity_scores.json").read_text())["scores"]
    papers = json.loads((Path(root) / "paper_metadata_recomm.json").read_text())
    features = Features(papers, embeddings)
    train_clicks, bad_train = read_clicks(folder / "train.csv")
    val_clicks, bad_val = read_clicks(folder / "val.csv")
    test_clicks, bad_test = read_clicks(folder / ("test.csv" if split == "test" else "val.csv"))
    scale = torch.tensor(propensity, dtype=torch.float32)
    scale = (scale * len(scale) / scale.sum()).to(device)

    def pair_tensors(clicks):
        pos, neg = training_pairs(clicks, config.max_results_per_query)
        return features.matrix(pos), features.matrix(neg)

    model, history = train(
        pair_tensors(train_clicks), pair_tensors(val_clicks) if split == "test" else None, scale, config, device
    )
    # every (query, candidate) pair of every test click scored in one pass; the clicked paper first in its block
    blocks, pairs, unembedded = [], [], set()
    for query, clicked, candidates, position in test_clicks:
        others = [c for c in candidates if c != clicked]
        unembedded.update(p for p in (query, clicked, *others) if p not in embeddings)
        blocks.append((len(pairs), len(others), position))
        pairs += [(query, clicked)] + [(query, o) for o in others]
    with torch.no_grad():
        scores = model(features.matrix(pairs).to(device)).reshape(-1).cpu().tolist() if pairs else []
    ranked = [
        (ranked_above(scores[start], scores[start + 1 : start + 1 + count]), position)
        for start, count, position in blocks
    ]
    if not ranked:
        return _rows(split, {}, 0, 0, status="missing", reason=f"recomm/{split}.csv has no usable click")
    metrics = click_metrics(ranked, propensity)
    values = {m: 100 * metrics[m] for m in ("adj-ndcg", "adj-p@1")}
    details = {
        "clicks": len(ranked),
        "clicks_skipped": {"train": bad_train, "val": bad_val, split: bad_test},
        "papers_without_embedding": len(unembedded),
        "unadjusted": {k: 100 * v for k, v in metrics.items() if not k.startswith("adj-")},
        "epochs": history,
        "device": device.type,
    }
    reason = f"{len(ranked)} clicks; {len(unembedded)} papers without embedding scored with a zero vector"
    log.info(
        "scidocs recomm/%s: Adj-nDCG %.2f, Adj-P@1 %.2f (%s)", split, values["adj-ndcg"], values["adj-p@1"], reason
    )
    return _rows(split, values, len(ranked), len(unembedded), reason=reason, details=details)
