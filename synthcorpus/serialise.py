"""Serialisation: the S2ORC, S2AG and paper-ids lines of a World, and the dirt of malformed lines.

JSON lines assembled column-wise from escaped fragments (no per-record json.dumps). Generated text is ASCII
letters, spaces and full stops; names and journals come pre-escaped from tables. S2ORC lines use json.dumps'
default separators and ASCII escapes, S2AG lines compact separators and raw UTF-8, as the real samples do.
Returns pyarrow string arrays, one line (with its newline) per element; generate.py writes them.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.synthcorpus.arrays import LARGE_STRING, concat_strings, csr_gather, int_strings, random_stream
from citeflow.synthcorpus.config import UPDATED_MS
from citeflow.synthcorpus.lexicon import FIELD_INDEX, FIELDS
from citeflow.synthcorpus.papers import Papers
from citeflow.synthcorpus.venues import INTENTS, JOURNAL_NAMES, OA_LICENSE, OA_STATUS, PUBLICATION_TYPES
from citeflow.synthcorpus.world import World


def _q(values: pa.Array) -> pa.Array:
    """JSON string, or null."""
    return pc.fill_null(concat_strings('"', values, '"'), pa.scalar("null", LARGE_STRING))


def _ids(values: np.ndarray) -> pa.Array:
    """Ids as strings; -1 becomes null."""
    return pa.array(values, pa.int64(), mask=np.asarray(values) < 0).cast(pa.string())


def _table(items: tuple[str, ...] | list[str], idx: np.ndarray) -> pa.Array:
    return pa.array(items, LARGE_STRING).take(pa.array(np.asarray(idx, dtype=np.int64)))


def _bool(mask: np.ndarray) -> pa.Array:
    return _table(("false", "true"), np.asarray(mask, dtype=np.int64))


def _json_list(offsets: np.ndarray, items: pa.Array, sep: str) -> pa.Array:
    items = items if items.type == LARGE_STRING else items.cast(LARGE_STRING)
    lists = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), items)
    return concat_strings("[", pc.binary_join(lists, pa.scalar(sep, LARGE_STRING)), "]")


def _id_list(offsets: np.ndarray, ids: np.ndarray, sep: str) -> pa.Array:
    return _json_list(offsets, concat_strings('"', int_strings(ids), '"'), sep)


def _dates(day: np.ndarray) -> pa.Array:
    return pc.strftime(pa.array(day * 86400, pa.int64()).cast(pa.timestamp("s")), format="%Y-%m-%d")


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pc.strftime(pa.array(ms, pa.int64()).cast(pa.timestamp("ms")), format="%Y-%m-%dT%H:%M:%SZ")


_JOURNAL_ASCII = tuple(json.dumps(x) for x in JOURNAL_NAMES) + ("null",)
_JOURNAL_UTF8 = tuple(json.dumps(x, ensure_ascii=False) for x in JOURNAL_NAMES) + ('""',)
# S2ORC mag_field_of_study by field * 20 + second field + 1
_FOS_S2ORC = tuple(json.dumps([f] if g < 0 else [f, FIELDS[g]]) for f in FIELDS for g in range(-1, len(FIELDS)))
# S2AG s2fieldsofstudy entries by variant (1 both sources, 2 model only, 3 external only) * 19 + field
_S2FOS_SOURCES = {0: (), 1: ("external", "s2-fos-model"), 2: ("s2-fos-model",), 3: ("external",)}
_S2FOS = tuple(
    ",".join(f'{{"category":"{f}","source":"{s}"}}' for s in _S2FOS_SOURCES[v]) for v in range(4) for f in FIELDS
)
_PDF_BODY = ("",) + tuple(f', "has_pdf_body_text": {json.dumps(bool(c & 1))}' for c in range(16))
_PDF_REST = ("",) + tuple(
    f', "has_pdf_parsed_abstract": {json.dumps(bool(c & 2))}, "has_pdf_parsed_body_text": {json.dumps(bool(c & 1))}'
    f', "has_pdf_parsed_bib_entries": {json.dumps(bool(c & 4))}'
    f', "has_pdf_parsed_ref_entries": {json.dumps(bool(c & 8))}'
    for c in range(16)
)


def s2orc_lines(world: World, idx: np.ndarray, abstracts: pa.Array | None, *, duplicate: bool = False) -> pa.Array:
    """S2ORC 20200705v1 metadata lines (with the trailing newline) of papers `idx`.

    A duplicate record is a strictly less complete copy: no abstract, year, external ids, venue, journal or
    inbound citations, only its first author and half of its clean references."""
    p, f = world.papers, world.papers.flags
    idx = np.asarray(idx, dtype=np.int64)
    cid = int_strings(p.corpus_id[idx])
    if duplicate:
        a_off, people = csr_gather(world.authors.ptr, world.authors.person, idx, cap=1)
        clean_len = world.clean_ptr[idx + 1] - world.clean_ptr[idx]
        out_off, out_dst = csr_gather(world.clean_ptr, world.dst, idx, cap=clean_len // 2)
        out_ids = p.corpus_id[out_dst]
        in_off = np.zeros(len(idx) + 1, dtype=np.int64)
        in_ids = np.empty(0, dtype=np.int64)
        pdf = np.full(len(idx), -1)
    else:
        a_off, people = csr_gather(world.authors.ptr, world.authors.person, idx)
        out_off, out_ids = csr_gather(world.out_ptr, world.out_val, idx)
        in_off, in_src = csr_gather(world.in_ptr, world.in_src, idx)
        in_ids = p.corpus_id[in_src]
        pdf = f["s2orc_pdf"][idx]
    null = "null"
    journal = lambda shown: _table(_JOURNAL_ASCII, np.where(shown, p.journal[idx], len(JOURNAL_NAMES)))  # noqa: E731
    fos = np.where(f["s2orc_fos_null"][idx], len(_FOS_S2ORC), p.field[idx] * (len(FIELDS) + 1) + p.field2[idx] + 1)
    return concat_strings(
        '{"paper_id": "',
        cid,
        '", "title": ',
        _q(world.title.take(pa.array(idx))),
        ', "authors": ',
        _json_list(a_off, world.authors.s2orc_json.take(pa.array(people)), ", "),
        ', "abstract": ',
        null if duplicate else _q(abstracts),
        ', "year": ',
        null if duplicate else int_strings(p.year[idx]),
        ', "arxiv_id": ',
        null if duplicate else _q(p.arxiv_id.take(pa.array(idx))),
        ', "acl_id": ',
        null if duplicate else _q(p.acl_id.take(pa.array(idx))),
        ', "pmc_id": ',
        null if duplicate else _q(concat_strings("PMC", _ids(p.pmc_id[idx]))),
        ', "pubmed_id": ',
        null if duplicate else _q(_ids(p.pubmed_id[idx])),
        ', "doi": ',
        null if duplicate else _q(p.doi.take(pa.array(idx))),
        ', "venue": ',
        null if duplicate else journal(f["s2orc_venue"][idx]),
        ', "journal": ',
        null if duplicate else journal(f["s2orc_journal"][idx]),
        _table(_PDF_BODY, pdf + 1),
        ', "mag_id": ',
        _q(_ids(p.mag_id[idx])),
        ', "mag_field_of_study": ',
        _table(_FOS_S2ORC + ("null",), fos),
        ', "outbound_citations": ',
        _id_list(out_off, out_ids, ", "),
        ', "inbound_citations": ',
        _id_list(in_off, in_ids, ", "),
        ', "has_outbound_citations": ',
        _bool(np.diff(out_off) > 0),
        ', "has_inbound_citations": ',
        _bool(np.diff(in_off) > 0),
        ', "has_pdf_parse": ',
        _bool(pdf >= 0),
        _table(_PDF_REST, pdf + 1),
        ', "s2_url": "https://api.semanticscholar.org/CorpusID:',
        cid,
        '"}\n',
    )


def _s2ag_dblp(p: Papers, idx: np.ndarray, arxiv: pa.Array) -> pa.Array:
    """S2AG DBLP ids: computer science papers on arXiv have the CoRR one (null otherwise)."""
    is_cs = pa.array(p.field[idx] == FIELD_INDEX["Computer Science"])
    return pc.if_else(
        is_cs,
        concat_strings("journals/corr/abs-", pc.replace_substring_regex(arxiv, r"[./]", "-")),
        pa.scalar(None, LARGE_STRING),
    )


def _s2ag_fields_of_study(p: Papers, idx: np.ndarray) -> pa.Array:
    """S2AG s2fieldsofstudy as JSON: the field and second field in the paper's source variant, or null."""
    s2fos = p.flags["s2fos"][idx]
    fos_entries = _table(_S2FOS, s2fos * len(FIELDS) + p.field[idx])
    second = np.where(p.field2[idx] >= 0, s2fos * len(FIELDS) + p.field2[idx], -1)
    fos_second = _table(("",) + tuple("," + x for x in _S2FOS), second + 1)
    return pc.if_else(
        pa.array(s2fos == 0), pa.scalar("null", LARGE_STRING), concat_strings("[", fos_entries, fos_second, "]")
    )


def _s2ag_journal(p: Papers, idx: np.ndarray) -> pa.Array:
    """S2AG journal objects as JSON: null, unnamed or named (s2ag_journal flag), with pages and volume."""
    f, null = p.flags, "null"
    mode = f["s2ag_journal"][idx]
    pages = pc.fill_null(
        concat_strings(
            '"',
            _ids(np.where(f["page_count"][idx] >= 0, f["first_page"][idx], -1)),
            "-",
            int_strings(f["first_page"][idx] + f["page_count"][idx]),
            '"',
        ),
        pa.scalar(null, LARGE_STRING),
    )
    volume = pc.fill_null(_ids(f["volume"][idx]).cast(LARGE_STRING), pa.scalar("", LARGE_STRING))
    journal = concat_strings(
        '{"name":',
        _table(_JOURNAL_UTF8, np.where(mode == 2, p.journal[idx], len(JOURNAL_NAMES))),
        ',"pages":',
        pages,
        ',"volume":"',
        volume,
        '"}',
    )
    return pc.if_else(pa.array(mode == 0), pa.scalar(null, LARGE_STRING), journal)


def s2ag_paper_lines(world: World, idx: np.ndarray, *, duplicate: bool = False) -> pa.Array:
    """S2AG `papers` lines of papers `idx`; a duplicate keeps only the corpus id, MAG id, title, first
    author and fields of study."""
    p, f = world.papers, world.papers.flags
    idx = np.asarray(idx, dtype=np.int64)
    take = pa.array(idx)
    cid = int_strings(p.corpus_id[idx])
    a_off, people = csr_gather(world.authors.ptr, world.authors.person, idx, cap=1 if duplicate else None)
    null = "null"
    arxiv = p.arxiv_id.take(take)
    dblp = _s2ag_dblp(p, idx, arxiv)
    fos = _s2ag_fields_of_study(p, idx)
    journal = _s2ag_journal(p, idx)
    date = pc.if_else(
        pa.array(f["has_date"][idx]), concat_strings('"', _dates(p.day[idx]), '"'), pa.scalar(null, LARGE_STRING)
    )
    counts = world.counts_per_paper
    return concat_strings(
        '{"corpusid":',
        cid,
        ',"externalids":{"ACL":',
        null if duplicate else _q(p.acl_id.take(take)),
        ',"DBLP":',
        null if duplicate else _q(dblp),
        ',"ArXiv":',
        null if duplicate else _q(arxiv),
        ',"MAG":',
        _q(_ids(p.mag_id[idx])),
        ',"CorpusId":"',
        cid,
        '","PubMed":',
        null if duplicate else _q(_ids(p.pubmed_id[idx])),
        ',"DOI":',
        null if duplicate else _q(p.doi.take(take)),
        ',"PubMedCentral":',
        null if duplicate else _q(_ids(p.pmc_id[idx])),
        '},"url":"https://www.semanticscholar.org/paper/',
        world.primary_sha.take(take),
        '","title":',
        _q(world.title.take(take)),
        ',"authors":',
        _json_list(a_off, world.authors.s2ag_json.take(pa.array(people)), ","),
        ',"venue":',
        '""'
        if duplicate
        else _table(_JOURNAL_UTF8, np.where(f["s2ag_venue"][idx], p.journal[idx], len(JOURNAL_NAMES))),
        ',"publicationvenueid":null,"year":',
        null if duplicate else int_strings(p.year[idx]),
        ',"referencecount":',
        "0" if duplicate else int_strings(counts["references"][idx]),
        ',"citationcount":',
        "0" if duplicate else int_strings(counts["citations"][idx]),
        ',"influentialcitationcount":',
        "0" if duplicate else int_strings(counts["influential"][idx]),
        ',"isopenaccess":',
        "false" if duplicate else _bool(f["open_access"][idx]),
        ',"s2fieldsofstudy":',
        fos,
        ',"publicationtypes":',
        null if duplicate else _table(PUBLICATION_TYPES, f["publication_type"][idx]),
        ',"publicationdate":',
        null if duplicate else date,
        ',"journal":',
        null if duplicate else journal,
        ',"updated":"',
        _timestamps(f["updated_ms"][idx] - (86_400_000 * 400 if duplicate else 0)),
        '"}\n',
    )


def s2ag_abstract_lines(world: World, idx: np.ndarray, abstracts: pa.Array) -> pa.Array:
    """S2AG `abstracts` lines of papers `idx` (abstract null where the paper has none)."""
    p, f = world.papers, world.papers.flags
    idx = np.asarray(idx, dtype=np.int64)
    take = pa.array(idx)
    doi, arxiv = p.doi.take(take), p.arxiv_id.take(take)
    oa = f["open_access"][idx]
    url = pc.coalesce(
        concat_strings('"https://doi.org/', doi, '"'), concat_strings('"https://arxiv.org/pdf/', arxiv, '.pdf"')
    )
    url = pc.if_else(pa.array(oa), pc.fill_null(url, pa.scalar("null", LARGE_STRING)), pa.scalar("null", LARGE_STRING))
    return concat_strings(
        '{"corpusid":',
        int_strings(p.corpus_id[idx]),
        ',"openaccessinfo":{"externalids":{"MAG":',
        _q(_ids(p.mag_id[idx])),
        ',"ACL":',
        _q(p.acl_id.take(take)),
        ',"DOI":',
        _q(doi),
        ',"PubMedCentral":',
        _q(_ids(p.pmc_id[idx])),
        ',"ArXiv":',
        _q(arxiv),
        '},"license":',
        _table(OA_LICENSE + ("null",), np.where(oa, f["oa_license"][idx], len(OA_LICENSE))),
        ',"url":',
        url,
        ',"status":',
        _table(OA_STATUS + ("null",), np.where(oa, f["oa_status"][idx], len(OA_STATUS))),
        '},"abstract":',
        _q(abstracts),
        ',"updated":"',
        _timestamps(f["updated_ms"][idx]),
        '"}\n',
    )


def s2ag_citation_lines(world: World, shard: int) -> pa.Array:
    """S2AG `citations` lines of one shard's rows."""
    rows = world.rows
    lo, hi = np.searchsorted(rows["shard"], [shard, shard + 1])
    citing, cited, fld = rows["citing"][lo:hi], rows["cited"][lo:hi], rows["field"][lo:hi]
    m = hi - lo
    rng = random_stream(world.config.seed, "citation-rows", shard)
    pool = world.context_pool
    per_field = len(pool) // len(FIELDS)
    first = _table(pool, fld * per_field + rng.integers(0, per_field, size=m))
    second = _table(pool, fld * per_field + rng.integers(0, per_field, size=m))
    two = pa.array(rng.random(m) < 0.3)
    contexts = concat_strings(
        "[", first, pc.if_else(two, concat_strings(",", second), pa.scalar("", LARGE_STRING)), "]"
    )
    contexts = pc.if_else(pa.array(rng.random(m) < 0.25), contexts, pa.scalar("null", LARGE_STRING))
    intents = _table(
        INTENTS + ("null",), np.where(rng.random(m) < 0.35, rng.integers(0, len(INTENTS), size=m), len(INTENTS))
    )
    return concat_strings(
        '{"citingcorpusid":',
        _q(_ids(citing)),
        ',"citedcorpusid":',
        _q(_ids(cited)),
        ',"isinfluential":',
        _bool(rng.random(m) < 0.1),
        ',"contexts":',
        contexts,
        ',"intents":',
        intents,
        ',"updated":"',
        _timestamps(rng.integers(*UPDATED_MS, size=m)),
        '"}\n',
    )


def paper_id_lines(sha: pa.Array, corpus_id: np.ndarray, primary: np.ndarray) -> pa.Array:
    return concat_strings(
        '{"sha":"', sha, '","corpusid":', int_strings(corpus_id), ',"primary":', _bool(primary), "}\n"
    )


def truncated_copies(rng: np.random.Generator, lines: pa.Array, count: int) -> pa.Array:
    """`count` malformed lines: copies of random lines cut at 30-90% of their length, so before the
    closing brace (a JSON object missing its closing brace never parses)."""
    if count == 0 or len(lines) == 0:
        return pa.array([], LARGE_STRING)
    source = rng.integers(0, len(lines), size=count)
    cut = rng.uniform(0.3, 0.9, size=count)
    texts = lines.take(pa.array(source)).to_pylist()
    return pa.array([t[: max(1, int((len(t) - 2) * c))] + "\n" for t, c in zip(texts, cut, strict=True)], LARGE_STRING)


def interleave(rng: np.random.Generator, lines: pa.Array, extra: pa.Array) -> pa.Array:
    """`lines` in order with `extra` inserted at random positions."""
    if len(extra) == 0:
        return lines
    n, k = len(lines), len(extra)
    slot = np.concatenate([np.arange(n), rng.integers(0, n + 1, size=k)])
    before = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(k, dtype=np.int64)])  # extras go first in a slot
    order = np.lexsort((rng.random(n + k), before, slot))
    return pa.concat_arrays([lines.cast(LARGE_STRING), extra.cast(LARGE_STRING)]).take(pa.array(order))


def line_bytes(lines: pa.Array) -> memoryview:
    """The bytes of a string array without nulls: its lines, back to back."""
    lines = lines.cast(LARGE_STRING)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    data = lines.buffers()[2]
    if data is None:
        return memoryview(b"")
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]
