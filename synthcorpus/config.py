"""`GenerateConfig`, what `citeflow generate` is asked for, and the fixed shape every generated snapshot has.

Reads and writes nothing. GENERATOR_VERSION names the output: the same version, seed and config give the same
bytes (tests/unit/synth/test_generate_bytes.py holds that to recorded hashes).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from citeflow.errors import CiteflowError

# Bump when the same seed and config would give different files.
GENERATOR_VERSION = 3

# Days since 1970-01-01 of the first and last possible publication date (1970-01-01 .. 2020-12-31).
FIRST_DAY, LAST_DAY = 0, 18627
YEAR_GROWTH = 0.06  # exponential growth of the yearly paper count
# "updated" timestamps: between 2019-06-01 and 2022-12-31 (ms since epoch).
UPDATED_MS = (1559347200000, 1672444800000)
# Corpus ids live here (like real corpus ids); external and author ids elsewhere.
CORPUS_ID_RANGE = (1_000, 300_000_000)
PAPERS_PER_SHARD = 50_000
PAPER_IDS_PER_SHARD = 1_000_000
TEXT_BLOCK = 10_000  # abstracts are generated in blocks of this many papers, whatever the shard count
# Each subtopic splits into one niche (a narrow topic most citations stay in) per NICHE_SCALE papers of the
# corpus, so that a niche holds ~175 papers whatever the size: enough for real reference lists (median 14)
# to stay mostly inside it while three papers in four are never cited.
NICHE_SCALE = 20_000
MAX_NICHES_PER_SUBTOPIC = 200


# Rates may be at most 0.5 (dirt is the exception, not the rule) except these.
_RATE_LIMITS = {
    "zero_reference_rate": 0.95,
    "missing_abstract_rate": 0.9,
}


@dataclass(frozen=True, kw_only=True)
class TopicStrength:
    """How strongly topics shape text and citations at one difficulty.

    Every paper has a niche (a narrow topic inside its subtopic) and a secondary niche; its references go
    mostly to papers of these two niches, so that papers citing each other share a niche's terms.
    Text: shares of an abstract's tokens by the vocabulary they come from (the rest: shared scientific
    English); titles draw TITLE_TOPIC_BOOST times as many. Citations: shares of references by where the cited
    paper is. Secondary niches: shares by where the secondary niche is."""

    niche_words: float  # the paper's niche's core terms
    niche2_words: float  # its secondary niche's core terms
    subtopic_words: float  # its subtopic's vocabulary
    field_words: float  # its field's vocabulary
    field2_words: float  # its second field's vocabulary (papers with one)
    foreign_words: float  # a random other subtopic's vocabulary: topics share words
    cite_niche: float  # references to papers of the citing paper's niche
    cite_niche2: float  # references to papers whose niche is its secondary niche
    cite_field: float  # references to other papers of its field (the rest: anywhere)
    niche2_in_subtopic: float  # papers whose secondary niche is in their own subtopic
    niche2_in_field: float  # ... in their field, another subtopic (the rest: in another field)


# difficulty -> TopicStrength; values between two anchors are interpolated linearly. 0 is easy, like the
# generator's first version (over half of a text's words name its topic; references stay in the subtopic); 0.5 is
# calibrated on real samples (calibration.py: topic-specific token share, same-field and citation text
# similarity); 1 is harder than real text.
DIFFICULTY_ANCHORS = (
    (0.0, TopicStrength(niche_words=0.0, niche2_words=0.0, subtopic_words=0.25, field_words=0.30,
                        field2_words=0.05, foreign_words=0.0,
                        cite_niche=0.35, cite_niche2=0.35, cite_field=0.2,
                        niche2_in_subtopic=1.0, niche2_in_field=0.0)),
    (0.5, TopicStrength(niche_words=0.08, niche2_words=0.075, subtopic_words=0.02, field_words=0.01,
                        field2_words=0.02, foreign_words=0.0,
                        cite_niche=0.7, cite_niche2=0.27, cite_field=0.02,
                        niche2_in_subtopic=0.45, niche2_in_field=0.15)),
    (1.0, TopicStrength(niche_words=0.04, niche2_words=0.03, subtopic_words=0.03, field_words=0.005,
                        field2_words=0.01, foreign_words=0.03,
                        cite_niche=0.35, cite_niche2=0.25, cite_field=0.1,
                        niche2_in_subtopic=0.3, niche2_in_field=0.3)),
)  # fmt: skip
DEFAULT_DIFFICULTY = 0.5
TITLE_TOPIC_BOOST = 1.8


def topic_strength(difficulty: float) -> TopicStrength:
    """DIFFICULTY_ANCHORS interpolated at `difficulty` (0 .. 1)."""
    points = [d for d, _ in DIFFICULTY_ANCHORS]
    names = [f.name for f in dataclasses.fields(TopicStrength)]
    values = {
        name: float(np.interp(difficulty, points, [getattr(t, name) for _, t in DIFFICULTY_ANCHORS])) for name in names
    }
    return TopicStrength(**values)


def field_help(text: str) -> dict[str, Any]:
    """Field metadata with the help text the command line shows (shared with DeriveConfig)."""
    return {"help": text}


@dataclass(frozen=True, kw_only=True)
class GenerateConfig:
    """`citeflow generate`: what snapshot to write where. Same config, same bytes."""

    papers: int = field(metadata=field_help("number of distinct papers in the corpus (at least 100)"))
    out: str = field(metadata=field_help("output folder; must be absent or empty unless overwrite is set"))
    seed: int = field(default=0, metadata=field_help("random seed (>= 0); same seed and config give identical files"))
    format: Literal["s2orc", "s2ag"] = field(
        default="s2orc",
        metadata=field_help("corpus layout: S2ORC 20200705v1 metadata or S2AG papers/abstracts/citations"),
    )
    shards: int | None = field(
        default=None, metadata=field_help("corpus shards per dataset; None: one per 50,000 papers (at least 1)")
    )
    overwrite: bool = field(
        default=False,
        metadata=field_help(
            "replace a previous generator output in `out` (corpus/, paper-ids/, "
            "scidocs/, generator.json); other files there are left alone"
        ),
    )
    compresslevel: int = field(
        default=4,
        metadata=field_help(
            "gzip level of the .jsonl.gz shards (1 fastest .. 9 smallest; 4 is half the time of 6 for 6% more bytes)"
        ),
    )
    difficulty: float = field(
        default=DEFAULT_DIFFICULTY,
        metadata=field_help(
            "how weakly topics shape text and citations, 0 .. 1: 0.5 (default) is calibrated on real samples "
            "(topic words a small share of the tokens, fields sharing most of their words; see README, "
            "'How real is the generated corpus'); 0 is easy (over half of a text's words name its topic, "
            "references stay in the subtopic: for fast tests); 1 is harder than real text"
        ),
    )
    # Graph shape
    mean_references: float = field(
        default=4.0,
        metadata=field_help(
            "mean out-degree drawn per paper (zero-reference papers included); papers with few older papers in "
            "their niches get fewer"
        ),
    )
    zero_reference_rate: float = field(
        default=0.865,
        metadata=field_help(
            "share of papers drawn with no references (real S2ORC: 84% have an empty outbound list; dirt such as "
            "citations outside the corpus gives a few of the others one)"
        ),
    )
    second_field_rate: float = field(default=0.10, metadata=field_help("share of papers with a second field of study"))
    generic_title_rate: float = field(
        default=0.002, metadata=field_help("share of papers with a generic title such as 'Editorial' (ambiguous)")
    )
    # Dirt (each injected into kept records only, so every count in generator.json is exact)
    missing_abstract_rate: float = field(
        default=0.51,
        metadata=field_help(
            "share of papers without abstract (real S2ORC: 51%), drawn so that papers with references lack one "
            "less often (real: 18% of them, against 57% of the others)"
        ),
    )
    missing_title_rate: float = field(default=0.003, metadata=field_help("share of papers with a null title"))
    duplicate_record_rate: float = field(
        default=0.003, metadata=field_help("extra, strictly less complete records of existing papers, per paper")
    )
    malformed_line_rate: float = field(
        default=0.001, metadata=field_help("extra truncated (unparseable) lines, per line of each dataset")
    )
    self_citation_rate: float = field(default=0.002, metadata=field_help("share of papers that cite themselves"))
    duplicate_citation_rate: float = field(
        default=0.003, metadata=field_help("extra copies of clean citations, per clean citation")
    )
    external_citation_rate: float = field(
        default=0.03, metadata=field_help("share of papers citing 1-3 papers outside the corpus")
    )
    null_id_citation_rate: float = field(
        default=0.01, metadata=field_help("S2AG: citation rows with a null id, per clean citation")
    )
    citing_outside_rate: float = field(
        default=0.02,
        metadata=field_help("S2AG: citation rows whose citing paper is outside the corpus, per clean citation"),
    )
    extra_sha_rate: float = field(default=0.10, metadata=field_help("non-primary shas in paper-ids, per corpus paper"))
    outside_sha_rate: float = field(
        default=0.05, metadata=field_help("paper-ids rows of papers outside the corpus, per corpus paper")
    )
    # SciDocs
    scidocs_queries: int | None = field(
        default=None, metadata=field_help("queries per ranking task and split; None: min(1000, max(5, papers // 200))")
    )
    scidocs_classification: int | None = field(
        default=None,
        metadata=field_help(
            "papers per classification task (split 60/20/20); None: min(25000, max(20, papers // 20)), enough "
            "training papers per class that a model's topic signal, not chance, decides the F1"
        ),
    )
    scidocs_negative_pool: int | None = field(
        default=None,
        metadata=field_help(
            "papers the random (rel 0) candidates are drawn from, so that SciDocs covers "
            "a minority of the corpus as in the original; None: max(1000, papers // 10)"
        ),
    )
    scidocs_title_only_rate: float = field(
        default=0.01,
        metadata=field_help("SciDocs papers whose sha is not in paper-ids but whose title is unique (at least 3)"),
    )
    scidocs_unmappable_rate: float = field(
        default=0.004, metadata=field_help("SciDocs papers that cannot be mapped at all (at least 3)")
    )
    scidocs_non_primary_rate: float = field(
        default=0.02, metadata=field_help("SciDocs papers keyed by a non-primary sha of their corpus paper")
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", os.fspath(self.out) if isinstance(self.out, os.PathLike) else self.out)
        if not isinstance(self.papers, int) or isinstance(self.papers, bool) or not 100 <= self.papers <= 50_000_000:
            raise CiteflowError(f"papers must be an integer between 100 and 50,000,000, not {self.papers!r}")
        if not isinstance(self.out, str) or not self.out:
            raise CiteflowError("an output folder is required (--out DIR)")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed < 2**63:
            raise CiteflowError(f"seed must be an integer between 0 and 2**63 - 1, not {self.seed!r}")
        if self.format not in ("s2orc", "s2ag"):
            raise CiteflowError(f"format must be s2orc or s2ag, not {self.format!r}")
        if self.shards is not None and (not isinstance(self.shards, int) or not 1 <= self.shards <= self.papers // 10):
            raise CiteflowError(
                f"shards must be between 1 and papers // 10 = {self.papers // 10} (or None for automatic), "
                f"not {self.shards!r}"
            )
        if not isinstance(self.compresslevel, int) or not 0 <= self.compresslevel <= 9:
            raise CiteflowError(f"compresslevel must be between 0 and 9, not {self.compresslevel!r}")
        if not 0 < self.mean_references <= 200:
            raise CiteflowError(f"mean_references must be in (0, 200], not {self.mean_references!r}")
        if isinstance(self.difficulty, bool) or not isinstance(self.difficulty, (int, float)):
            raise CiteflowError(f"difficulty must be a number between 0 and 1, not {self.difficulty!r}")
        if not 0 <= self.difficulty <= 1:
            raise CiteflowError(f"difficulty must be between 0 and 1, not {self.difficulty!r}")
        for f in dataclasses.fields(self):
            if f.name.endswith("_rate"):
                value = getattr(self, f.name)
                limit = _RATE_LIMITS.get(f.name, 0.5)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= limit:
                    raise CiteflowError(f"{f.name} must be between 0 and {limit}, not {value!r}")
        for name in ("scidocs_queries", "scidocs_classification", "scidocs_negative_pool"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise CiteflowError(f"{name} must be a positive integer or None, not {value!r}")

    @property
    def niches_per_subtopic(self) -> int:
        return int(min(MAX_NICHES_PER_SUBTOPIC, max(1, round(self.papers / NICHE_SCALE))))

    @property
    def topics(self) -> TopicStrength:
        return topic_strength(self.difficulty)

    @property
    def shard_count(self) -> int:
        return self.shards if self.shards is not None else max(1, math.ceil(self.papers / PAPERS_PER_SHARD))

    @property
    def query_count(self) -> int:
        if self.scidocs_queries is not None:
            return self.scidocs_queries
        return min(1000, max(5, self.papers // 200))

    @property
    def negative_pool(self) -> int:
        return self.scidocs_negative_pool if self.scidocs_negative_pool is not None else max(1000, self.papers // 10)

    @property
    def classification_count(self) -> int:
        if self.scidocs_classification is not None:
            return self.scidocs_classification
        return min(25_000, max(20, self.papers // 20))
