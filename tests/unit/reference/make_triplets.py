"""Run the reference triplet samplers on small known inputs and record what they produce: `triplets.json`.

    python tests/unit/reference/make_triplets.py SPECTER_CHECKOUT SCINCL_CHECKOUT

SPECTER_CHECKOUT: a work tree of allenai/specter (its `specter/data_utils/triplet_sampling.py` is loaded by
path, since `specter/__init__.py` needs allennlp); SCINCL_CHECKOUT: a work tree of malteos/scincl (its
`gdt.triples_miner` package: FaissSampler in `sampling.py`, `worker.py`). The reference code runs unchanged;
this script only builds its inputs and summarises its outputs. Not part of the test run:
`tests/unit/test_reference_triplets.py` compares citeflow with the recorded output.

SPECTER: `TripletGenerator` with `create_training_files.py`'s defaults (margin_fraction 0.5,
samples_per_query 5, ratio_hard_negatives 0.3) on the `data.json` of a small citation graph (count 5: the
query cites the candidate; count 1: a paper the query cites cites it, and the query does not), run with
RUNS numpy seeds. Recorded per query: how many triplets, their kinds in order (hard: the negative has count
1; easy: an uncited paper), and every positive, hard and easy negative seen.

SciNCL: `worker_generate_triples` with the FAISS backend on an exact inner-product index (IVF with a single
list, which searches everything) of POINTS random unit vectors and the README's strategy, windows scaled to
the small pool: 5 positives by kNN from ranks 4-8 (k_min 3, k_max 8), 2 hard negatives by kNN from ranks
19-20 (k_min 18, k_max 20), 3 easy negatives random_without_knn; every point is a query. Recorded: the
triplets (ids) of the first RECORDED queries for SCINCL_RUNS seeds.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

RUNS = 300
POOL = 40
# (citing, cited) pool positions; paper ids are 1000 + position.
EDGES = [
    (0, 1), (0, 2), (1, 3), (1, 4), (2, 4), (2, 1),  # 2 cites 1, which 0 cites itself: 1 stays a positive
    (5, 6), (6, 7),  # one citation, one citation of a citation
    (8, 9),  # 9 cites nothing: no citation of a citation
    (10, 11), (10, 12), (10, 13), (11, 14), (11, 15), (11, 16), (11, 17), (11, 18), (11, 19), (12, 14),
    (20, 21), (20, 22), (21, 23), (22, 23),
]  # fmt: skip
QUERIES = [0, 5, 8, 10, 20]
# SciNCL: POINTS unit vectors (rng seed VECTOR_SEED, DIM-d Gaussian, L2-normalised, float32), all queries;
# the triplets of the first RECORDED are kept.
POINTS, DIM, VECTOR_SEED, RECORDED, SCINCL_RUNS = 1000, 16, 7, 40, 5


def commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown (not a git work tree)"


def data_json() -> dict:
    cites: dict[int, set[int]] = {}
    for a, b in EDGES:
        cites.setdefault(a, set()).add(b)
    out = {}
    for q in QUERIES:
        direct = cites.get(q, set())
        second = {c for p in direct for c in cites.get(p, set())} - direct - {q}
        out[str(1000 + q)] = {
            **{str(1000 + c): {"count": 5} for c in sorted(direct)},
            **{str(1000 + c): {"count": 1} for c in sorted(second)},
        }
    return out


def specter(checkout: Path) -> dict:
    path = checkout / "specter" / "data_utils" / "triplet_sampling.py"
    spec = importlib.util.spec_from_file_location("specter_triplet_sampling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = data_json()
    generator = module.TripletGenerator(
        paper_ids=[str(1000 + i) for i in range(POOL)],
        coviews=data,
        margin_fraction=0.5,
        samples_per_query=5,
        ratio_hard_negatives=0.3,
    )
    seen: dict[str, dict] = {
        str(1000 + q): {"triplets": set(), "kinds": set(), "positives": set(), "hard": set(), "easy": set()}
        for q in QUERIES
    }
    for run in range(RUNS):
        np.random.seed(run)
        per_query: dict[str, list] = {q: [] for q in seen}
        for query, (positive, _), (negative, count) in generator.generate_triplets([str(1000 + q) for q in QUERIES]):
            per_query[query].append((positive, negative, "hard" if count == 1 else "easy"))
        for query, triplets in per_query.items():
            s = seen[query]
            s["triplets"].add(len(triplets))
            s["kinds"].add(tuple(kind for _, _, kind in triplets))
            for positive, negative, kind in triplets:
                s["positives"].add(positive)
                s[kind].add(negative)
    return {
        "data_json": data,
        "per_query": {
            q: {
                "triplets": sorted(s["triplets"]),
                "kinds": sorted(list(k) for k in s["kinds"]),
                "positives": sorted(s["positives"]),
                "hard_negatives": sorted(s["hard"]),
                "easy_negatives": sorted(s["easy"]),
            }
            for q, s in seen.items()
        },
    }


def points() -> np.ndarray:
    x = np.random.default_rng(VECTOR_SEED).normal(size=(POINTS, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def scincl(checkout: Path) -> dict:
    import faiss

    sys.path.insert(0, str(checkout))
    from gdt.triples_miner import TriplesMinerArguments
    from gdt.triples_miner.worker import worker_generate_triples

    ids = [str(1000 + i) for i in range(POINTS)]
    with tempfile.TemporaryDirectory() as tmp:
        # IVF with one list is an exact search like the README's Flat index, and accepts the `nprobe` the
        # reference sets (faiss >= 1.8 refuses unknown attributes on IndexFlat; 1.7.1 ignored them).
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, 1, faiss.METRIC_INNER_PRODUCT)
        index.train(points())
        index.add(points())
        faiss.write_index(index, f"{tmp}/flat.faiss")
        args = TriplesMinerArguments(
            ann_index_path=f"{tmp}/flat.faiss",
            ann_backend="faiss",
            ann_metric="inner_product",
            triples_per_query=5,
            easy_positives_count=5,
            easy_positives_strategy="knn",
            easy_positives_k_min=3,
            easy_positives_k_max=8,
            easy_negatives_count=3,
            easy_negatives_strategy="random_without_knn",
            hard_negatives_count=2,
            hard_negatives_strategy="knn",
            hard_negatives_k_min=18,
            hard_negatives_k_max=20,
        )
        runs = []
        for run in range(SCINCL_RUNS):
            triplets = worker_generate_triples(
                0, ids, {p: i for i, p in enumerate(ids)}, dict(enumerate(ids)), DIM, run, dict(args.__dict__)
            )
            runs.append([list(t) for t in triplets[: 5 * RECORDED]])
    return {
        "points": POINTS,
        "dim": DIM,
        "vector_seed": VECTOR_SEED,
        "windows": {"positive_ranks": [4, 8], "hard_ranks": [19, 20]},
        "runs": runs,
    }


def main(argv: list[str]) -> int:
    specter_checkout, scincl_checkout = Path(argv[0]), Path(argv[1])
    out = {
        "about": "output of the reference samplers themselves; see make_triplets.py",
        "specter": {"commit": commit(specter_checkout), "runs": RUNS, "pool": POOL, "edges": EDGES},
        "scincl": {"commit": commit(scincl_checkout)},
    }
    out["specter"].update(specter(specter_checkout))
    out["scincl"].update(scincl(scincl_checkout))
    target = Path(__file__).with_name("triplets.json")
    text = json.dumps(out, indent=1, sort_keys=True)
    # innermost lists (ids, triplets) on one line each: a reviewable file
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    target.write_text(text + "\n")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
