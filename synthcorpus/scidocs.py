"""A SciDocs evaluation set over a generated snapshot, and the truth about how each of its ids maps.

`plan_scidocs` picks the papers, labels, queries and candidates (docs/reference.md §6, original layout; no
recomm) and, through scidocs_ids.py, how each SciDocs id can be found: by its primary or a non-primary sha in
paper-ids, by a title unique in the corpus only, or not at all (a title matching no corpus paper or several,
folded as the leakage filter folds them, citeflow.text). `write_scidocs` writes `scidocs/`, `write_scidocs_truth` writes
`scidocs_truth.jsonl` beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from citeflow.errors import CiteflowError
from citeflow.synthcorpus.arrays import (
    csr_gather,
    csr_owner,
    random_stream,
    rank_in_groups,
    sample_per_group,
    weighted_sample,
)
from citeflow.synthcorpus.lexicon import (
    FIELD_INDEX,
    FIELDS,
    MESH_CLASSES,
)
from citeflow.synthcorpus.scidocs_ids import map_ids, unmappable_texts
from citeflow.synthcorpus.world import World

SCIDOCS_TASKS = ("cite", "cocite", "coview", "coread")
_MEDICINE = FIELD_INDEX["Medicine"]


@dataclass
class SciDocsPlan:
    """A SciDocs set over the corpus. Papers are corpus indices (>= 0) or unmappable papers (-1 - j)."""

    classification: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]  # task -> split -> (paper, label)
    ranking: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]  # task -> split -> (query, paper, rel)
    papers: np.ndarray  # distinct corpus papers in SciDocs, sorted
    sha: list[str]  # their SciDocs id
    title: list[str]  # their SciDocs title (re-spelt for title-only papers)
    kind: np.ndarray  # 0 primary sha, 1 non-primary sha, 2 sha unknown to paper-ids (title only)
    virtual_sha: list[str]  # unmappable papers
    virtual_title: list[str]
    virtual_abstract: list[str]
    virtual_ambiguous: np.ndarray  # bool: the title matches several corpus papers (else none)

    def ids(self, papers: np.ndarray) -> list[str]:
        papers = np.asarray(papers, dtype=np.int64)
        pos = np.where(papers >= 0, np.searchsorted(self.papers, papers), len(self.papers) - 1 - papers)
        table = self.sha + self.virtual_sha
        return [table[i] for i in pos.tolist()]


def related_pairs(world: World, task: str, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in `queries`, related paper) pairs, unique, without the query itself.

    cite: papers the query cites. cocite: papers cited together with the query by some paper.
    coread (proxy for co-reading): papers sharing a reference with the query (bibliographic coupling).
    coview (proxy for co-viewing): co-cited or coupled papers of the query's own subtopic.
    Neighbourhoods are capped (30 citing papers / references, then 60 / 30) to bound the work.
    """
    n = world.papers.n

    def cocited() -> tuple[np.ndarray, np.ndarray]:
        off1, citers = csr_gather(world.in_ptr, world.in_src, queries, cap=30)
        off2, other = csr_gather(world.clean_ptr, world.dst, citers, cap=60)
        return csr_owner(off1)[csr_owner(off2)], other

    def coupled() -> tuple[np.ndarray, np.ndarray]:
        off1, refs = csr_gather(world.clean_ptr, world.dst, queries, cap=30)
        off2, other = csr_gather(world.in_ptr, world.in_src, refs, cap=30)
        return csr_owner(off1)[csr_owner(off2)], other

    if task == "cite":
        off, other = csr_gather(world.clean_ptr, world.dst, queries)
        q = csr_owner(off)
    elif task == "cocite":
        q, other = cocited()
    elif task == "coread":
        q, other = coupled()
    elif task == "coview":
        (q1, o1), (q2, o2) = cocited(), coupled()
        q, other = np.concatenate([q1, q2]), np.concatenate([o1, o2])
        same = world.papers.community[other] == world.papers.community[queries[q]]
        q, other = q[same], other[same]
    else:
        raise ValueError(task)
    keep = other != queries[q]
    keys = np.unique(q[keep] * n + other[keep])
    return keys // n, keys % n


def _ranking_split(
    world: World, rng: np.random.Generator, queries: np.ndarray, qpos: np.ndarray, related: np.ndarray, pool: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (query, paper, rel) for `queries`: up to 5 random related papers (rel 1) and 25 random papers
    of `pool` that are neither related nor the query (rel 0), shuffled within each query."""
    n = world.papers.n
    pos = sample_per_group(rng, qpos, 5)
    draws = 40
    owner = np.repeat(np.arange(len(queries), dtype=np.int64), draws)
    neg = pool[rng.integers(0, len(pool), size=len(owner))]
    keys = owner * n + neg
    bad = np.isin(keys, qpos * n + related) | (neg == queries[owner])
    keys, owner = keys[~bad], owner[~bad]
    _, first = np.unique(keys, return_index=True)
    first = np.sort(first)  # distinct, in draw order (so grouped by query)
    first = first[rank_in_groups(owner[first]) < 25]
    q = np.concatenate([qpos[pos], owner[first]])
    paper = np.concatenate([related[pos], keys[first] % n])
    rel = np.concatenate([np.ones(len(pos), dtype=np.int64), np.zeros(len(first), dtype=np.int64)])
    order = np.lexsort((rng.random(len(q)), q))
    return queries[q[order]], paper[order], rel[order]


def _split(papers: np.ndarray, labels: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    m = len(papers)
    n_train, n_val = round(0.6 * m), round(0.2 * m)
    cuts = {"train": (0, n_train), "val": (n_train, n_train + n_val), "test": (n_train + n_val, m)}
    return {k: (papers[a:b], labels[a:b]) for k, (a, b) in cuts.items()}


# task -> split -> (query, paper, rel) and task -> split -> (paper, label), as in SciDocsPlan.
_Ranking = dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]
_Classification = dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]


def _eligible(world: World) -> np.ndarray:
    """Papers that may be in the set: a title, an abstract, and not a generic title."""
    titled = ~np.asarray(pc.is_null(world.title).to_numpy(zero_copy_only=False), dtype=bool)
    eligible_mask = titled & world.has_abstract & ~world.generic
    if eligible_mask.sum() < 30:
        raise CiteflowError("too few papers with title and abstract for a SciDocs set; generate more papers")
    return eligible_mask


def _ranking_tasks(world: World, rng: np.random.Generator, eligible_mask: np.ndarray, pool: np.ndarray) -> _Ranking:
    """Per ranking task, val and test queries with related papers (among up to 8 * query_count candidates)
    and their candidate rows."""
    nq = world.config.query_count
    out_deg, in_deg = np.diff(world.clean_ptr), np.diff(world.in_ptr)
    ranking: _Ranking = {}
    for task in SCIDOCS_TASKS:
        degree = {"cite": out_deg, "coread": out_deg, "cocite": in_deg, "coview": out_deg + in_deg}[task]
        candidates = rng.permutation(np.flatnonzero(eligible_mask & (degree > 0)))[: 8 * nq]
        qpos, other = related_pairs(world, task, candidates)
        keep = eligible_mask[other]
        qpos, other = qpos[keep], other[keep]
        chosen = np.flatnonzero(np.bincount(qpos, minlength=len(candidates)) > 0)
        each = min(nq, len(chosen) // 2)
        ranking[task] = {}
        for split, sel in (("val", chosen[:each]), ("test", chosen[each : 2 * each])):
            local = np.full(len(candidates), -1, dtype=np.int64)
            local[sel] = np.arange(len(sel))
            mine = local[qpos] >= 0
            ranking[task][split] = _ranking_split(world, rng, candidates[sel], local[qpos[mine]], other[mine], pool)
    return ranking


def _classification(world: World, rng: np.random.Generator, eligible: np.ndarray) -> _Classification:
    """MAG (field labels, fields balanced) and MeSH (Medicine's subtopics, balanced) papers, split 60/20/20."""
    p, size = world.papers, world.config.classification_count
    fields = p.field[eligible]
    mag = eligible[weighted_sample(rng, 1.0 / np.bincount(fields, minlength=len(FIELDS))[fields], size)]
    medicine = eligible[fields == _MEDICINE]
    subtopics = p.subtopic[medicine]
    mesh = medicine[weighted_sample(rng, 1.0 / np.bincount(subtopics, minlength=len(MESH_CLASSES))[subtopics], size)]
    return {"mag": _split(mag, p.field[mag]), "mesh": _split(mesh, p.subtopic[mesh])}


def _set_papers(ranking: _Ranking, classification: _Classification) -> np.ndarray:
    """Every paper of the set (corpus indices and unmappable ones), in file order."""
    return np.concatenate(
        [a for t in classification.values() for a, _ in t.values()]
        + [a for t in ranking.values() for r in t.values() for a in r[:2]]
    )


def _place_unmappable(rate: float, rng: np.random.Generator, ranking: _Ranking, classification: _Classification) -> int:
    """Put the unmappable papers (-1 - j) in place of random negatives of the ranking tasks (or into MAG train
    if there are none), in place; returns how many there are."""
    used = np.unique(_set_papers(ranking, classification))
    n_virtual = 0 if rate == 0 else max(3, round(rate * len(used)))
    negatives = [
        (task, split, i)
        for task in SCIDOCS_TASKS
        for split in ("val", "test")
        for i in np.flatnonzero(ranking[task][split][2] == 0)
    ]
    chosen_neg = rng.choice(len(negatives), size=min(n_virtual, len(negatives)), replace=False) if negatives else []
    for j, k in enumerate(sorted(int(x) for x in chosen_neg)):
        task, split, i = negatives[k]
        ranking[task][split][1][i] = -1 - j
    extra = n_virtual - len(chosen_neg)
    if extra:
        papers, labels = classification["mag"]["train"]
        classification["mag"]["train"] = (
            np.concatenate([papers, -1 - np.arange(len(chosen_neg), n_virtual)]),
            np.concatenate([labels, rng.integers(0, len(FIELDS), size=extra)]),
        )
    return n_virtual


def plan_scidocs(world: World) -> SciDocsPlan:
    """Pick the set's papers, labels, queries and candidates, and how each of its ids maps (module docstring)."""
    cfg = world.config
    rng = random_stream(cfg.seed, "scidocs")
    eligible_mask = _eligible(world)
    eligible = np.flatnonzero(eligible_mask)
    pool = np.sort(rng.choice(eligible, size=min(len(eligible), cfg.negative_pool), replace=False))
    ranking = _ranking_tasks(world, rng, eligible_mask, pool)
    classification = _classification(world, rng, eligible)
    n_virtual = _place_unmappable(cfg.scidocs_unmappable_rate, rng, ranking, classification)
    every = _set_papers(ranking, classification)
    used = np.unique(every[every >= 0])
    mapping = map_ids(world, rng, used, n_virtual)
    unmappable = unmappable_texts(world, n_virtual)
    return SciDocsPlan(
        classification=classification,
        ranking=ranking,
        papers=used,
        sha=mapping.sha,
        title=mapping.title,
        kind=mapping.kind,
        virtual_sha=mapping.virtual_sha,
        virtual_title=unmappable.title,
        virtual_abstract=unmappable.abstract,
        virtual_ambiguous=np.arange(n_virtual) < unmappable.ambiguous,
    )


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_scidocs(plan: SciDocsPlan, abstracts: dict[int, str | None], root: Path) -> dict[str, Any]:
    """Write the SciDocs files; returns the truth about them for generator.json."""

    def entries(papers: list[np.ndarray]) -> dict[str, dict[str, Any]]:
        every = np.concatenate(papers) if papers else np.empty(0, np.int64)
        _, first = np.unique(every, return_index=True)
        every = every[np.sort(first)]
        out = {}
        for paper, sha in zip(every.tolist(), plan.ids(every), strict=True):
            if paper >= 0:
                i = int(np.searchsorted(plan.papers, paper))
                title, abstract = plan.title[i], abstracts[paper]
            else:
                title, abstract = plan.virtual_title[-1 - paper], plan.virtual_abstract[-1 - paper]
            out[sha] = {"paper_id": sha, "title": title, "abstract": abstract}
        return out

    tasks: dict[str, Any] = {}
    for task, splits in plan.classification.items():
        for split, (papers, labels) in splits.items():
            body = "".join(f"{sha},{label}\n" for sha, label in zip(plan.ids(papers), labels.tolist(), strict=True))
            _write_text(root / task / f"{split}.csv", "pid,class_label\n" + body)
        tasks[task] = {split: len(papers) for split, (papers, _) in splits.items()}
        tasks[task]["classes"] = len(FIELDS) if task == "mag" else len(MESH_CLASSES)
        tasks[task]["papers"] = len(np.unique(np.concatenate([p for p, _ in splits.values()])))
    for task, splits in plan.ranking.items():
        tasks[task] = {}
        for split, (queries, papers, rel) in splits.items():
            body = "".join(
                f"{q} 0 {p} {r}\n" for q, p, r in zip(plan.ids(queries), plan.ids(papers), rel.tolist(), strict=True)
            )
            _write_text(root / task / f"{split}.qrel", body)
            tasks[task][split] = {
                "queries": len(np.unique(queries)),
                "candidates": len(papers),
                "positives": int(rel.sum()),
            }
        tasks[task]["papers"] = len(np.unique(np.concatenate([a for q, p, _ in splits.values() for a in (q, p)])))
    mag_mesh = entries([p for t in plan.classification.values() for p, _ in t.values()])
    view_cite_read = entries([a for t in plan.ranking.values() for q, p, _ in t.values() for a in (q, p)])
    _write_text(root / "paper_metadata_mag_mesh.json", json.dumps(mag_mesh))
    _write_text(root / "paper_metadata_view_cite_read.json", json.dumps(view_cite_read))
    ids = len(set(mag_mesh) | set(view_cite_read))
    title_only = int((plan.kind == 2).sum())
    return {
        "ids": ids,
        "mapped_by_sha": len(plan.papers) - title_only,
        "mapped_by_non_primary_sha": int((plan.kind == 1).sum()),
        "mapped_by_title_only": title_only,
        "unmappable": len(plan.virtual_sha),
        "unmappable_with_ambiguous_title": int(plan.virtual_ambiguous.sum()),
        "metadata": {
            "paper_metadata_mag_mesh.json": len(mag_mesh),
            "paper_metadata_view_cite_read.json": len(view_cite_read),
        },
        "tasks": tasks,
        "labels": {"mag": list(FIELDS), "mesh": list(MESH_CLASSES)},
    }


def write_scidocs_truth(plan: SciDocsPlan, world: World, path: Path) -> None:
    """scidocs_truth.jsonl: per SciDocs id, the corpus paper it is and how a mapping should find it.

    `method` is `sha` (in paper-ids, primary or not), `title` (sha unknown, folded title unique in the
    corpus) or null (unmappable; `ambiguous_title` tells whether its title matches several papers).
    Kept beside scidocs/, not in it, so that readers of the SciDocs layout never see it.
    """
    corpus_ids = world.papers.corpus_id[plan.papers].tolist()
    rows = [
        {"id": sha, "corpus_id": cid, "method": "title" if kind == 2 else "sha", "ambiguous_title": False}
        for sha, cid, kind in zip(plan.sha, corpus_ids, plan.kind.tolist(), strict=True)
    ]
    rows += [
        {"id": sha, "corpus_id": None, "method": None, "ambiguous_title": bool(amb)}
        for sha, amb in zip(plan.virtual_sha, plan.virtual_ambiguous.tolist(), strict=True)
    ]
    _write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
