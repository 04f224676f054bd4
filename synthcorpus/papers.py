"""Papers and authors of a snapshot: topics, publication dates, fitness, journals, external ids, authors.

`sample_papers` also samples the papers a later release adds (`LaterRelease`, used by derive_plan.py): the same
draws with other dates and ids. Arrays in, arrays out (no files).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.synthcorpus.arrays import (
    csr_owner,
    int_strings,
    lengths_to_offsets,
    random_stream,
    rank_in_groups,
    unique_ints,
)
from citeflow.synthcorpus.config import CORPUS_ID_RANGE, LAST_DAY, UPDATED_MS, YEAR_GROWTH, GenerateConfig
from citeflow.synthcorpus.lexicon import (
    COMMUNITY_OFFSETS,
    FIELD_INDEX,
    FIELD_WEIGHTS,
    FIELDS,
    FIRST_NAMES,
    LAST_NAMES,
    SUBTOPIC_COUNTS,
)
from citeflow.synthcorpus.venues import (
    ARXIV_ARCHIVES,
    DOI_PREFIXES,
    JOURNAL_ABBR,
    JOURNAL_OFFSET,
    OA_LICENSE,
    OA_STATUS,
    PUBLICATION_TYPES,
)
from citeflow.synthcorpus.vocabulary import Topics

# Preferential attachment: a paper's attractiveness is lognormal(0, FITNESS_SIGMA).
FITNESS_SIGMA = 1.2
_NLP_COMMUNITY = int(COMMUNITY_OFFSETS[FIELD_INDEX["Computer Science"]]) + 1


@dataclass
class Papers:
    """Per-paper arrays; the index of a paper is its position in the corpus shards (write order)."""

    n: int
    corpus_id: np.ndarray  # int64, distinct, random order
    field: np.ndarray  # int64 index into FIELDS
    field2: np.ndarray  # int64 second field or -1
    subtopic: np.ndarray  # int64 index into SUBTOPICS[field]
    community: np.ndarray  # int64 global subtopic index
    niche: np.ndarray  # int64 global niche index: community * niches_per_subtopic + niche within the subtopic
    niche2: np.ndarray  # int64 secondary niche (global index): its text and references lean on it too
    day: np.ndarray  # int64 days since 1970-01-01 (publication date)
    year: np.ndarray  # int64
    fitness: np.ndarray  # float64 attractiveness for preferential attachment
    journal: np.ndarray  # int64 index into JOURNAL_NAMES
    mag_id: np.ndarray  # int64 or -1
    pubmed_id: np.ndarray  # int64 or -1
    pmc_id: np.ndarray  # int64 or -1
    doi: pa.Array  # string or null
    arxiv_id: pa.Array  # string or null
    acl_id: pa.Array  # string or null
    flags: dict[str, np.ndarray]  # per-paper draws of presentation details (venue shown, pdf parse, ...)

    @property
    def topics(self) -> Topics:
        return Topics(
            field=self.field, field2=self.field2, community=self.community, niche=self.niche, niche2=self.niche2
        )


def _days_to_year(day: np.ndarray) -> np.ndarray:
    dates = np.datetime64("1970-01-01", "D") + day.astype("timedelta64[D]")
    return dates.astype("datetime64[Y]").astype(np.int64) + 1970


def _ranked_ids(groups: np.ndarray, start: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """A distinct running number per element within its group (start, start + 1, ...), and whether it fits."""
    order = np.argsort(groups, kind="stable")
    rank = np.empty(len(groups), dtype=np.int64)
    rank[order] = rank_in_groups(groups[order])
    number = start + rank
    return number, number < limit


def _zero_pad(values: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(int_strings(values), width=width, padding="0")


def _niches(
    rng: np.random.Generator,
    config: GenerateConfig,
    field_: np.ndarray,
    field2: np.ndarray,
    subtopic: np.ndarray,
    community: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Each paper's niche (uniform within its subtopic) and secondary niche: another niche of its subtopic, of
    another subtopic of its field, or of another field (its second field if it has one), in the difficulty's
    shares."""
    n, k = len(field_), config.niches_per_subtopic
    local = rng.integers(0, k, size=n)
    niche = community * k + local
    in_subtopic = community * k + ((local + rng.integers(1, k, size=n)) % k if k > 1 else local)
    count = SUBTOPIC_COUNTS[field_]
    other_sub = (subtopic + rng.integers(1, count)) % count
    in_field = (COMMUNITY_OFFSETS[field_] + other_sub) * k + rng.integers(0, k, size=n)
    other = np.where(field2 >= 0, field2, (field_ + rng.integers(1, len(FIELDS), size=n)) % len(FIELDS))
    away = (COMMUNITY_OFFSETS[other] + (rng.random(n) * SUBTOPIC_COUNTS[other]).astype(np.int64)) * k
    away += rng.integers(0, k, size=n)
    t = config.topics
    u = rng.random(n)
    niche2 = np.where(
        u < t.niche2_in_subtopic, in_subtopic, np.where(u < t.niche2_in_subtopic + t.niche2_in_field, in_field, away)
    )
    return niche, niche2


@dataclass(frozen=True)
class LaterRelease:
    """Where papers added by a later release go (derive_plan.py): published in the year after the
    release they extend, with corpus ids and MAG / PubMed / PMC ids that release does not use."""

    papers: int  # how many papers to sample (instead of config.papers)
    first_day: int  # January 1st of the new year, in days since 1970-01-01
    taken_ids: np.ndarray  # int64 ids in use (corpus ids, cited and paper-ids ids); new ones avoid them
    mag_floor: int  # new external ids are larger than every id of the old release, as in reality
    pubmed_floor: int
    pmc_floor: int


@dataclass(frozen=True)
class _Basics:
    """What the papers stream draws: topics, publication dates, corpus ids, fitness and journals."""

    field: np.ndarray
    field2: np.ndarray
    subtopic: np.ndarray
    community: np.ndarray
    day: np.ndarray
    year: np.ndarray
    corpus_id: np.ndarray
    fitness: np.ndarray
    journal: np.ndarray


@dataclass(frozen=True)
class _ExternalIds:
    """MAG, PubMed and PMC ids (-1 for none) and DOI, arXiv and ACL ids (null for none)."""

    mag_id: np.ndarray
    pubmed_id: np.ndarray
    pmc_id: np.ndarray
    doi: pa.Array
    arxiv_id: pa.Array
    acl_id: pa.Array


def _basics(config: GenerateConfig, n: int, later: LaterRelease | None) -> _Basics:
    """Fields, subtopics and second fields; dates on an exponentially growing yearly output (squeezed into the
    new year for a later release); distinct corpus ids; fitness; a journal of the field (the first ones likelier)."""
    rng = random_stream(config.seed, "papers")
    field_ = rng.choice(len(FIELDS), size=n, p=FIELD_WEIGHTS).astype(np.int64)
    subtopic = (rng.random(n) * SUBTOPIC_COUNTS[field_]).astype(np.int64)
    community = COMMUNITY_OFFSETS[field_] + subtopic
    field2 = rng.choice(len(FIELDS), size=n, p=FIELD_WEIGHTS).astype(np.int64)
    same = field2 == field_
    field2[same] = (field_[same] + rng.integers(1, len(FIELDS), size=int(same.sum()))) % len(FIELDS)
    field2[rng.random(n) >= config.second_field_rate] = -1
    # Exponential growth of the yearly output: inverse CDF of exp(g t) on [0, T).
    span = (LAST_DAY + 1) / 365.25
    t = np.log1p(rng.random(n) * np.expm1(YEAR_GROWTH * span)) / YEAR_GROWTH
    day = np.minimum((t * 365.25).astype(np.int64), LAST_DAY)
    if later is not None:  # the same growth curve squeezed into the new year
        day = later.first_day + (t / span * 365).astype(np.int64)
    corpus_id = unique_ints(rng, n, *CORPUS_ID_RANGE, exclude=None if later is None else later.taken_ids)
    fitness = rng.lognormal(0.0, FITNESS_SIGMA, size=n)
    journal = JOURNAL_OFFSET[field_] + (np.diff(JOURNAL_OFFSET)[field_] * rng.random(n) ** 1.7).astype(np.int64)
    return _Basics(
        field=field_,
        field2=field2,
        subtopic=subtopic,
        community=community,
        day=day,
        year=_days_to_year(day),
        corpus_id=corpus_id,
        fitness=fitness,
        journal=journal,
    )


def _doi(ids: np.random.Generator, year: np.ndarray, journal: np.ndarray) -> pa.Array:
    """DOI: registrant / journal abbreviation . year . a distinct number (null for papers without one)."""
    n = len(year)
    has_doi = ids.random(n) < np.where(year >= 2000, 0.75, 0.45)
    prefix = pa.array(DOI_PREFIXES).take(pa.array(ids.integers(0, len(DOI_PREFIXES), size=n)))
    abbr = pa.array(JOURNAL_ABBR).take(pa.array(journal))
    serial = unique_ints(ids, n, 10_000, 99_999_999)
    doi = pc.binary_join_element_wise("10.", prefix, "/", abbr, ".", int_strings(year), ".", int_strings(serial), "")
    return pc.if_else(pa.array(has_doi), doi, pa.scalar(None, pa.string()))


def _arxiv_ids(ids: np.random.Generator, field_: np.ndarray, day: np.ndarray, year: np.ndarray) -> pa.Array:
    """arXiv: physics, mathematics and computer science from 1992; old-style ids before April 2007."""
    n = len(field_)
    archives = [ARXIV_ARCHIVES.get(f, ()) for f in FIELDS]
    rate = np.array([{"Physics": 0.45, "Mathematics": 0.35, "Computer Science": 0.35}.get(f, 0.0) for f in FIELDS])
    has_arxiv = (ids.random(n) < rate[field_]) & (year >= 1992)
    month = (np.datetime64("1970-01-01", "D") + day.astype("timedelta64[D]")).astype("datetime64[M]").astype(np.int64)
    yymm = _zero_pad(((month // 12 + 1970) % 100) * 100 + month % 12 + 1, 4)
    old_style = day < 13604  # 2007-04-01
    n_arch = np.array([max(len(a), 1) for a in archives])
    archive_no = (ids.random(n) * n_arch[field_]).astype(np.int64)
    archive_names = [a for arch in archives for a in (arch or ("physics",))]
    archive_offset = np.concatenate([[0], np.cumsum(n_arch)])
    archive = archive_offset[field_] + archive_no
    group = np.where(old_style, archive * 10_000 + month, -month - 1)
    number, fits = _ranked_ids(np.where(has_arxiv, group, np.iinfo(np.int64).max), 1, 10_000)
    fits &= np.where(old_style, number < 1000, True)
    has_arxiv &= fits
    new_width = np.where(year >= 2015, 5, 4)
    new_id = pc.if_else(
        pa.array(new_width == 5),
        pc.binary_join_element_wise(yymm, ".", _zero_pad(number, 5), ""),
        pc.binary_join_element_wise(yymm, ".", _zero_pad(number, 4), ""),
    )
    old_id = pc.binary_join_element_wise(
        pa.array(archive_names).take(pa.array(archive)), "/", yymm, _zero_pad(number, 3), ""
    )
    return pc.if_else(
        pa.array(has_arxiv), pc.if_else(pa.array(old_style), old_id, new_id), pa.scalar(None, pa.string())
    )


def _acl_ids(ids: np.random.Generator, community: np.ndarray, year: np.ndarray) -> pa.Array:
    """ACL Anthology: natural language processing papers from 1979."""
    n = len(community)
    has_acl = (community == _NLP_COMMUNITY) & (year >= 1979) & (ids.random(n) < 0.6)
    letter = ids.integers(0, 5, size=n)
    acl_number, acl_fits = _ranked_ids(np.where(has_acl, letter * 100 + year % 100, -1), 1001, 10_000)
    has_acl &= acl_fits
    acl_id = pc.binary_join_element_wise(
        pa.array(list("PNDEC")).take(pa.array(letter)), _zero_pad(year % 100, 2), "-", int_strings(acl_number), ""
    )
    return pc.if_else(pa.array(has_acl), acl_id, pa.scalar(None, pa.string()))


def _with_room(bounds: tuple[int, int], n: int) -> tuple[int, int]:
    """`bounds` widened to twice `n` ids when it holds fewer than 1.25 × `n` (`unique_ints` slows as a range
    fills, and never ends when it holds fewer than `n`)."""
    low, high = bounds
    return (low, high) if high - low >= 1.25 * n else (low, low + 2 * n)


def _external_ids(seed: int, b: _Basics, later: LaterRelease | None) -> _ExternalIds:
    """External ids, all from one stream in this order; a later release's numeric ids lie above the old ones'."""
    n = len(b.field)
    ids = random_stream(seed, "external-ids")
    mag_range, pubmed_range, pmc_range = (1_000_000_000, 3_200_000_000), (1_000_000, 35_000_000), (1_000_000, 9_000_000)
    if later is not None:
        room = 20 * n + 1000
        mag_range, pubmed_range, pmc_range = (
            (f, f + room) for f in (later.mag_floor, later.pubmed_floor, later.pmc_floor)
        )
    # each range holds n distinct ids with room to spare: PMC's 8M ids cannot hold 10M papers' (a 10M-paper
    # corpus drew forever); a range widened only where it was that tight, so every corpus made before is unchanged
    mag_range, pubmed_range, pmc_range = (_with_room(r, n) for r in (mag_range, pubmed_range, pmc_range))
    mag_id = np.where(ids.random(n) < 0.94, unique_ints(ids, n, *mag_range), -1)
    life = np.isin(b.field, [FIELD_INDEX[f] for f in ("Medicine", "Biology", "Psychology")])
    has_pubmed = (life & (ids.random(n) < 0.55)) | (ids.random(n) < 0.03)
    pubmed_id = np.where(has_pubmed, unique_ints(ids, n, *pubmed_range), -1)
    pmc_id = np.where(has_pubmed & (ids.random(n) < 0.25) & (b.year >= 1990), unique_ints(ids, n, *pmc_range), -1)
    return _ExternalIds(
        mag_id=mag_id,
        pubmed_id=pubmed_id,
        pmc_id=pmc_id,
        doi=_doi(ids, b.year, b.journal),
        arxiv_id=_arxiv_ids(ids, b.field, b.day, b.year),
        acl_id=_acl_ids(ids, b.community, b.year),
    )


def _flags(seed: int, n: int) -> dict[str, np.ndarray]:
    """Per-paper draws of presentation details (Papers.flags)."""
    fl = random_stream(seed, "flags")
    return {
        # S2ORC: venue and journal shown (real sample: venue 25%, journal 70%), PDF parse (20%), fos null (3%)
        "s2orc_venue": fl.random(n) < 0.25,
        "s2orc_journal": fl.random(n) < 0.72,
        "s2orc_pdf": np.where(fl.random(n) < 0.2, fl.integers(0, 16, size=n), -1),
        "s2orc_fos_null": fl.random(n) < 0.03,
        # S2AG: venue shown, journal object (0 null, 1 unnamed, 2 named), pages, volume, open access, ...
        "s2ag_venue": fl.random(n) < 0.45,
        "s2ag_journal": fl.choice(3, size=n, p=[0.25, 0.25, 0.5]),
        "first_page": fl.integers(1, 2000, size=n),
        "page_count": np.where(fl.random(n) < 0.7, fl.integers(1, 25, size=n), -1),
        "volume": np.where(fl.random(n) < 0.8, fl.integers(1, 120, size=n), -1),
        "open_access": fl.random(n) < 0.3,
        "oa_status": fl.integers(0, len(OA_STATUS), size=n),
        "oa_license": fl.integers(0, len(OA_LICENSE), size=n),
        "s2fos": fl.choice(4, size=n, p=[0.1, 0.45, 0.3, 0.15]),
        "publication_type": fl.choice(len(PUBLICATION_TYPES), size=n, p=[0.7, 0.15, 0.05, 0.03, 0.05, 0.02]),
        "has_date": fl.random(n) < 0.92,
        "updated_ms": fl.integers(*UPDATED_MS, size=n),
    }


def sample_papers(config: GenerateConfig, later: LaterRelease | None = None) -> Papers:
    """The papers of a snapshot or, with `later`, the papers a later release adds (same draws, other
    dates and ids; None leaves a fresh snapshot's bytes as they were)."""
    n, seed = (config.papers if later is None else later.papers), config.seed
    b = _basics(config, n, later)
    niche, niche2 = _niches(random_stream(seed, "niches"), config, b.field, b.field2, b.subtopic, b.community)
    ext = _external_ids(seed, b, later)
    return Papers(
        n=n,
        corpus_id=b.corpus_id,
        field=b.field,
        field2=b.field2,
        subtopic=b.subtopic,
        community=b.community,
        niche=niche,
        niche2=niche2,
        day=b.day,
        year=b.year,
        fitness=b.fitness,
        journal=b.journal,
        mag_id=ext.mag_id,
        pubmed_id=ext.pubmed_id,
        pmc_id=ext.pmc_id,
        doi=ext.doi,
        arxiv_id=ext.arxiv_id,
        acl_id=ext.acl_id,
        flags=_flags(seed, n),
    )


@dataclass
class Authors:
    """A pool of people (most publish several papers, in their home field) and each paper's author list."""

    s2orc_json: pa.Array  # one S2ORC author object per person, serialised
    s2ag_json: pa.Array  # one S2AG author object per person, serialised
    ptr: np.ndarray  # CSR over papers
    person: np.ndarray


def sample_authors(papers: Papers, seed: int) -> Authors:
    rng = random_stream(seed, "authors")
    n = papers.n
    people = int(np.clip(n * 0.35, 50, 500_000))
    home = np.sort(rng.choice(len(FIELDS), size=people, p=FIELD_WEIGHTS))
    first_names, last_names = FIRST_NAMES.split(), LAST_NAMES.split()
    first = rng.integers(0, len(first_names), size=people)
    last = rng.integers(0, len(last_names), size=people)
    initial_only = rng.random(people) < 0.35
    middle = np.where(rng.random(people) < 0.3, rng.integers(0, 26, size=people), -1)
    author_id = unique_ints(rng, people, 1_000_000, 2_200_000_000)
    # First names as shown: the full name or its initial ("J."). S2ORC escapes non-ASCII, S2AG does not.
    shown = first_names + [name[0] + "." for name in first_names]
    shown_idx = pa.array(first + initial_only * len(first_names))
    letters = [chr(ord("A") + i) + "." for i in range(26)]
    middle_s2orc = pa.array(["[]"] + [f'["{x}"]' for x in letters]).take(pa.array(middle + 1))
    s2orc_json = pc.binary_join_element_wise(
        '{"first": ',
        pa.array([json.dumps(x) for x in shown]).take(shown_idx),
        ', "middle": ',
        middle_s2orc,
        ', "last": ',
        pa.array([json.dumps(x) for x in last_names]).take(pa.array(last)),
        ', "suffix": ""}',
        "",
    )
    middle_s2ag = pa.array([""] + [" " + x for x in letters]).take(pa.array(middle + 1))
    name = pc.binary_join_element_wise(
        pa.array(shown).take(shown_idx), middle_s2ag, " ", pa.array(last_names).take(pa.array(last)), ""
    )
    s2ag_json = pc.binary_join_element_wise(
        '{"authorId":"', int_strings(author_id), '","name":', pc.binary_join_element_wise('"', name, '"', ""), "}", ""
    )
    # Papers: 1-12 authors from the paper's field, prolific people more often (u ** 1.6 skews to the front).
    counts = np.clip(1 + rng.poisson(2.4, size=n), 1, 12)
    ptr = lengths_to_offsets(counts)
    owner = csr_owner(ptr)
    start = np.searchsorted(home, np.arange(len(FIELDS)), side="left")
    size = np.searchsorted(home, np.arange(len(FIELDS)), side="right") - start
    f = papers.field[owner]
    u = rng.random(len(owner))
    person = np.where(size[f] > 0, start[f] + (size[f] * u**1.6).astype(np.int64), (people * u).astype(np.int64))
    return Authors(s2orc_json=s2orc_json, s2ag_json=s2ag_json, ptr=ptr, person=person)
