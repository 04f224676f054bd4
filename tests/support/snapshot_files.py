"""Reading a generated snapshot's files back with json and gzip only, and the build_graph rules restated
independently of the pipeline (which copy of a duplicate id is kept), for the generator's tests."""

from __future__ import annotations

import collections
import gzip
import json
import re
from pathlib import Path


def lines_of(folder: Path) -> list[str]:
    out = []
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            out.extend(fh.read().splitlines())
    return out


def parse(lines: list[str]) -> tuple[list[dict], int]:
    """(records, lines that are not a JSON object)."""
    records, bad = [], 0
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    return records, bad


def fold(title: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", title.lower()).split())


def filled(value) -> bool:
    return value is not None and value != "" and value != []


def s2orc_score(r: dict) -> int:
    """The build_graph rule: one point per filled field, plus fields of study, plus citations."""
    fields = ("title", "abstract", "year", "doi", "pubmed_id", "arxiv_id", "mag_id")
    return (
        sum(filled(r[f]) for f in fields)
        + filled(r["venue"] or r["journal"])
        + filled(r["mag_field_of_study"])
        + filled(r["outbound_citations"])
    )


def s2ag_score(r: dict) -> int:
    ext = r["externalids"]
    venue = r["venue"] or (r["journal"] or {}).get("name")
    return (
        sum(filled(r[f]) for f in ("title", "year"))
        + filled(venue)
        + sum(filled(ext[k]) for k in ("DOI", "PubMed", "ArXiv", "MAG"))
        + filled(r["s2fieldsofstudy"])
    )


def kept(records: list[dict], key: str, score) -> dict:
    """Most complete record per id; asserts it is strictly more complete than every other copy."""
    by_id = collections.defaultdict(list)
    for r in records:
        by_id[r[key]].append(r)
    out = {}
    for pid, copies in by_id.items():
        ranked = sorted(copies, key=score, reverse=True)
        if len(ranked) > 1:
            assert score(ranked[0]) > score(ranked[1]), f"duplicate of {pid} is as complete as the original"
        out[pid] = ranked[0]
    return out
