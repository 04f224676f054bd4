"""SciDocs' recommendation task (recomm) over a generated snapshot: click logs, propensities, paper metadata.

Writes, in allenai/scidocs' original layout (what `evaluation/recomm.py` reads, after
`scidocs/recommender/simclick_data_reader.py` and `scidocs/recomm_click_eval.py`):
- `recomm/{train,val,test}.csv`: a header line, then one click per line, `query,clicked,"c1,c2,...,cK"` (the
  candidates in the order they were shown, the clicked paper among them);
- `recomm/propensity_scores.json`: `{"scores": [p_1, ..., p_K]}`, how likely a reader looks at each position;
- `paper_metadata_recomm.json`: per id, `paper_id`, `title`, `abstract`, `authors` (person ids), `references` and
  `cited_by` (ids: the SciDocs id of a SciDocs paper, else the paper's primary sha), `year`.

The clicks carry a signal that text embeddings can learn and that the metadata alone does not give away: the
clicked paper is a paper of the query's subtopic; the other candidates come from other subtopics, a third of them
from the query's own field. Positions are biased as in a real log: the clicked paper is shown at position k with
probability proportional to the propensity of k, which falls with k. Every paper is one of the SciDocs set's
corpus papers with a sha (so recomm adds no benchmark id of its own, and the leakage filter already knows them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from citeflow.synthcorpus.arrays import random_stream
from citeflow.synthcorpus.world import World

CANDIDATES = 10  # shown per click, the clicked one included
SPLITS = (("train", 0.65), ("val", 0.10), ("test", 0.25))
HEADER = "query_pid,clicked_pid,shown_pids\n"
LIST_CAP = 50  # references / cited_by listed per paper
# Share of a paper's references and citing papers its metadata lists (S2's lists were far from complete): with
# every one listed, the reference and cited-by overlaps alone would find most clicked papers.
LIST_SHARE = 0.25


def propensities(k: int = CANDIDATES) -> list[float]:
    """Examination probability by position 1..k, falling as 1 / position^0.7 (rounded for the file)."""
    return [round(float(p), 6) for p in (np.arange(1, k + 1, dtype=np.float64) ** -0.7)]


def nth_remaining(pool: np.ndarray, removed: list[int], ranks: np.ndarray) -> np.ndarray:
    """Positions in sorted `pool` of the `ranks`-th elements left once `removed` (members of it) are taken out.

    Equals indexing `np.setdiff1d(pool, removed)` by `ranks`, in O(len(removed) log) instead of O(len(pool)).
    """
    gone = np.sort(np.searchsorted(pool, np.asarray(removed, dtype=np.int64)))
    shifted = gone - np.arange(len(gone))  # how many remaining elements lie before each removed one
    ranks = np.asarray(ranks, dtype=np.int64)
    return ranks + np.searchsorted(shifted, ranks, side="right")


def plan_clicks(world: World, papers: np.ndarray, seed: int) -> dict[str, list[tuple[int, int, list[int]]]]:
    """split -> [(query, clicked, shown candidates)] over corpus paper indices `papers` (distinct)."""
    rng = random_stream(seed, "recomm")
    community = world.papers.community[papers]
    field = world.papers.field[papers]
    order = np.argsort(community, kind="stable")
    by_community: dict[int, np.ndarray] = {}
    starts = np.flatnonzero(np.r_[True, np.diff(community[order]) != 0])
    for a, b in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        by_community[int(community[order[a]])] = order[a:b]
    sizes = np.diff(np.r_[starts, len(order)])
    members = np.zeros(len(papers), dtype=np.int64)
    members[order] = np.repeat(sizes, sizes)
    queries = np.flatnonzero(members >= 2)
    if len(queries) == 0 or len(by_community) < 2:
        return {name: [] for name, _ in SPLITS}
    n_clicks = int(min(6000, 2 * len(papers)))
    weights = np.asarray(propensities(), dtype=np.float64)
    distractors: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # community -> (same field, any other community)
    clicks = []
    for q in rng.choice(queries, size=n_clicks).tolist():
        mates = by_community[int(community[q])]
        clicked = int(mates[rng.integers(0, len(mates))])
        while clicked == q:
            clicked = int(mates[rng.integers(0, len(mates))])
        if int(community[q]) not in distractors:
            other = community != community[q]
            distractors[int(community[q])] = (np.flatnonzero(other & (field == field[q])), np.flatnonzero(other))
        near, far = distractors[int(community[q])]
        # two thirds from the query's field (as many as it has), the rest from anywhere else
        n_near = min(2 * (CANDIDATES - 1) // 3, len(near))
        others = [int(x) for x in rng.choice(near, size=n_near, replace=False)] if n_near else []
        # a draw from `far` without `others` (a subset of it), indexed in place instead of copying `far` per click
        n_rest = len(far) - len(others)
        picked = rng.choice(n_rest, size=min(CANDIDATES - 1 - n_near, n_rest), replace=False)
        others += [int(x) for x in far[nth_remaining(far, others, picked)]]
        position = int(rng.choice(len(others) + 1, p=weights[: len(others) + 1] / weights[: len(others) + 1].sum()))
        shown = others[:position] + [clicked] + others[position:]
        clicks.append((q, clicked, shown))
    out, start = {}, 0
    for name, share in SPLITS:
        end = len(clicks) if name == SPLITS[-1][0] else start + round(share * len(clicks))
        out[name] = [
            (int(papers[query]), int(papers[hit]), [int(papers[x]) for x in listed])
            for query, hit, listed in clicks[start:end]
        ]
        start = end
    return out


def write_recomm(
    world: World,
    papers: np.ndarray,
    ids: dict[int, str],
    titles: dict[int, str],
    abstracts: dict[int, str | None],
    root: Path,
) -> dict[str, Any]:
    """Write recomm/ and paper_metadata_recomm.json under the SciDocs folder `root`; returns the truth about them.

    `papers` are the corpus paper indices recomm may use, `ids` / `titles` their SciDocs ids and titles.
    """
    clicks = plan_clicks(world, np.asarray(papers, dtype=np.int64), world.config.seed)
    (root / "recomm").mkdir(parents=True, exist_ok=True)
    for name, rows in clicks.items():
        body = "".join(f'{ids[q]},{ids[c]},"{",".join(ids[s] for s in shown)}"\n' for q, c, shown in rows)
        (root / "recomm" / f"{name}.csv").write_text(HEADER + body, encoding="utf-8")
    (root / "recomm" / "propensity_scores.json").write_text(json.dumps({"scores": propensities()}), encoding="utf-8")

    used = sorted({p for rows in clicks.values() for q, c, shown in rows for p in (q, c, *shown)})
    sha = world.primary_sha

    def name_of(paper: int) -> str:
        return ids.get(paper) or sha[paper].as_py()

    a = world.authors
    rng = random_stream(world.config.seed, "recomm-metadata")
    metadata = {}
    for p in used:
        refs = world.dst[world.clean_ptr[p] : world.clean_ptr[p + 1]]
        citers = world.in_src[world.in_ptr[p] : world.in_ptr[p + 1]]
        refs = refs[rng.random(len(refs)) < LIST_SHARE][:LIST_CAP]
        citers = citers[rng.random(len(citers)) < LIST_SHARE][:LIST_CAP]
        metadata[ids[p]] = {
            "paper_id": ids[p],
            "title": titles[p],
            "abstract": abstracts.get(p),
            "authors": [str(x) for x in a.person[a.ptr[p] : a.ptr[p + 1]].tolist()],
            "references": [name_of(int(x)) for x in refs.tolist()],
            "cited_by": [name_of(int(x)) for x in citers.tolist()],
            "year": int(world.papers.year[p]),
        }
    (root / "paper_metadata_recomm.json").write_text(json.dumps(metadata), encoding="utf-8")
    truth: dict[str, Any] = {name: len(rows) for name, rows in clicks.items()}
    truth.update(candidates=CANDIDATES, papers=len(used))
    return truth
