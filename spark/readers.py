"""Parse S2ORC and S2AG JSON lines into one normalised paper layout.

Transforms only: each function takes DataFrames and returns DataFrames; the
stage (`jobs/build_graph.py`) reads files and writes tables. Input is a
DataFrame of raw lines (`value`, `source`) from `spark.read.text`, so that a
line that is not JSON is kept verbatim in `rejected` instead of vanishing.

Scalar fields are parsed as strings and cast afterwards: real snapshots mix
`"year": 1999` with `"year": "1999"`, and ids appear as numbers in one dataset
and as strings in the next (S2AG `papers.corpusid` vs `citations`).

`rejected.raw` keeps the input line as *bytes* (binary), exactly as read: a
line that is not valid UTF-8 stays readable by every Parquet reader (a string
column holding invalid UTF-8 makes pyarrow fail on the whole table).

A corpus file that cannot be read at all (a truncated or corrupt gzip shard)
fails the stage with one line naming the file (`unreadable_file`), rather
than being quarantined: Spark has already ingested the lines before the
damage, and a shard missing its tail would silently lose papers.

Parquet tables (a version's committed tables) are read by spark/scans.py.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from citeflow.spark.scans import set_task_size, task_size_is_ours

S = T.StringType()
CORRUPT = "_corrupt_record"

# Reasons a row or an edge is rejected (the `rejected` table's `reason`).
BLANK_LINE = "blank_line"
MALFORMED = "malformed_json"
BAD_FIELD_TYPE = "bad_field_type"
MISSING_ID = "missing_id"
INVALID_ID = "invalid_id"
DUPLICATE_PAPER = "duplicate_paper"
DUPLICATE_ABSTRACT = "duplicate_abstract"
ABSTRACT_WITHOUT_PAPER = "abstract_without_paper"
NULL_ID = "null_id"
SELF_CITATION = "self_citation"
CITED_NOT_IN_CORPUS = "cited_not_in_corpus"
CITING_NOT_IN_CORPUS = "citing_not_in_corpus"
DUPLICATE_CITATION = "duplicate_citation"

CORPUS_ID_PATTERN = r"^[0-9]{1,18}$"
# Jackson's default cap on one JSON string is 20,000,000 characters (a 20 MiB abstract would be labelled
# malformed_json); the line is in memory already, so any valid line is parsed.
MAX_JSON_STRING = str(2**31 - 1)

S2ORC_SCHEMA = T.StructType(
    [
        T.StructField("paper_id", S),
        T.StructField("title", S),
        T.StructField("abstract", S),
        T.StructField("year", S),
        T.StructField("venue", S),
        T.StructField("journal", S),
        T.StructField("doi", S),
        T.StructField("pubmed_id", S),
        T.StructField("pmc_id", S),
        T.StructField("arxiv_id", S),
        T.StructField("acl_id", S),
        T.StructField("mag_id", S),
        T.StructField("mag_field_of_study", T.ArrayType(S)),
        T.StructField("outbound_citations", T.ArrayType(S)),
        T.StructField("inbound_citations", T.ArrayType(S)),
        T.StructField(CORRUPT, S),
    ]
)


def s2orc_schema(citations_from: str) -> T.StructType:
    """`S2ORC_SCHEMA` without the citation list the stage does not read (`citations_from` picks
    `outbound_citations` or `inbound_citations`).

    The other list is as long as the one used and costs as much to parse (about a quarter of the parse);
    left out of the schema, Spark's JSON parser skips it unread, so a wrong type
    there no longer rejects a paper whose fields in use are all sound.
    """
    unused = "inbound_citations" if citations_from == "outbound" else "outbound_citations"
    return T.StructType([f for f in S2ORC_SCHEMA.fields if f.name != unused])


S2AG_EXTERNAL_IDS = T.StructType(
    [T.StructField(k, S) for k in ("ACL", "DBLP", "ArXiv", "MAG", "CorpusId", "PubMed", "DOI", "PubMedCentral")]
)

S2AG_PAPERS_SCHEMA = T.StructType(
    [
        T.StructField("corpusid", S),
        T.StructField("externalids", S2AG_EXTERNAL_IDS),
        T.StructField("title", S),
        T.StructField("venue", S),
        T.StructField("year", S),
        T.StructField(
            "s2fieldsofstudy",
            T.ArrayType(T.StructType([T.StructField("category", S), T.StructField("source", S)])),
        ),
        T.StructField("journal", T.StructType([T.StructField("name", S)])),
        T.StructField(CORRUPT, S),
    ]
)

S2AG_ABSTRACTS_SCHEMA = T.StructType(
    [T.StructField("corpusid", S), T.StructField("abstract", S), T.StructField(CORRUPT, S)]
)

S2AG_CITATIONS_SCHEMA = T.StructType(
    [T.StructField("citingcorpusid", S), T.StructField("citedcorpusid", S), T.StructField(CORRUPT, S)]
)

# What a paper carries besides its id, in both formats and in the papers table.
PAPER_ATTRIBUTES = [
    "title",
    "abstract",
    "year",
    "venue",
    "fields_of_study",
    "doi",
    "pubmed_id",
    "pmc_id",
    "arxiv_id",
    "acl_id",
    "mag_id",
    "dblp_id",
]
# The normalised paper layout both formats are parsed into (before dedup).
PAPER_FIELDS = ["id_raw", *PAPER_ATTRIBUTES]

REJECTED_SCHEMA = T.StructType(
    [
        T.StructField("kind", S),
        T.StructField("reason", S),
        T.StructField("id", S),
        T.StructField("cited_id", S),
        T.StructField("source", S),
        T.StructField("raw", T.BinaryType()),
    ]
)


def nonblank(col: Column) -> Column:
    """Trimmed string, or null when empty.

    Compared with the empty string rather than by `length`, which counts the characters of every title and
    abstract."""
    trimmed = F.trim(col)
    return F.when(trimmed != F.lit(""), trimmed)


def to_year(col: Column) -> Column:
    """'1999', 1999 and 1999.0 all become 1999; anything else null."""
    return col.try_cast("double").try_cast("int")


def is_corpus_id(col: Column) -> Column:
    return col.isNotNull() & col.rlike(CORPUS_ID_PATTERN)


def with_source(lines: DataFrame) -> DataFrame:
    """Raw text lines with the name of the file each came from."""
    return lines.select("value", F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1).alias("source"))


# The least bytes of a task that reads gzip shards (`read_lines`).
MIN_TASK_BYTES = 16 << 20


def read_lines(spark, files: list[str], sizes: list[int]) -> DataFrame:
    """The lines of `files` with their source (`with_source`), each gzip file in its own task.

    A gzip file cannot be split, and Spark packs small files into tasks of up to `maxPartitionBytes` (128
    MB): 20 shards of 28 MB on two cores became 5 tasks, the last running alone. So the session's
    `maxPartitionBytes` is set to the largest shard's size, but never below 16 MB: the setting holds for
    the session's later reads too, and a diff's 1 MB files would have every parquet table read in 1 MB tasks
    after them (279 tasks for a 278 MB table). One scan per shard, unioned, would need no setting, but parses
    S2ORC shards about 25% slower. A `maxPartitionBytes` the user set (`spark.conf`) is left as it is. Plain
    `.jsonl` files are split by the session's setting.
    """
    if files and all(f.endswith(".gz") for f in files) and task_size_is_ours(spark):
        set_task_size(spark, max(max(sizes), MIN_TASK_BYTES))
    return with_source(spark.read.text(files))


def diff_lines(spark, diff, dataset: str, kind: str, schema, transform=lambda parsed: parsed) -> DataFrame:
    """The lines of one dataset's `kind` files ("updates" or "deletes") over a release diff's steps
    (`citeflow.diffs.Diff`), parsed (`parse_lines` with `schema`), through `transform`, with `_step` (the step's
    index); an empty frame of the same columns for a step without such files. Each gzip file in its own task."""
    import pyarrow.fs as pafs

    fs = pafs.LocalFileSystem()  # diffs are local folders (citeflow.diffs.release_diffs)
    frames = []
    for i, step in enumerate(diff.steps):
        files = step.files_of(kind, dataset)
        if files:
            lines = read_lines(spark, ["file://" + f for f in files], [fs.get_file_info(f).size for f in files])
        else:
            lines = spark.createDataFrame([], "value string, source string")
        frames.append(transform(parse_lines(lines, schema)).withColumn("_step", F.lit(i)))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame


def parse_lines(lines: DataFrame, schema: T.StructType) -> DataFrame:
    """Parse `value` as JSON.

    Adds `rec` (the parsed struct) and `parse_error`: `blank_line` for an empty
    line, `malformed_json` when the line is not a JSON object, `bad_field_type`
    when it is one but a field has a type the schema cannot hold (e.g. a string
    where a list belongs).
    """
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT, "maxStringLen": MAX_JSON_STRING}
    parsed = lines.withColumn("rec", F.from_json("value", schema, options))
    data_fields = [f.name for f in schema.fields if f.name != CORRUPT]
    any_field = F.coalesce(*[F.col(f"rec.{f}").cast("string") for f in data_fields])
    # A line of spaces never parses (`rec` is null), so only the lines that did not parse are trimmed and
    # measured: doing so for every line costs a quarter of the parse.
    blank = F.trim("value") == F.lit("")
    error = (
        F.when(F.col("rec").isNull(), F.when(blank, F.lit(BLANK_LINE)).otherwise(F.lit(MALFORMED)))
        .when(F.col(f"rec.{CORRUPT}").isNotNull() & any_field.isNull(), F.lit(MALFORMED))
        .when(F.col(f"rec.{CORRUPT}").isNotNull(), F.lit(BAD_FIELD_TYPE))
    )
    return parsed.withColumn("parse_error", error)


def id_error(col: Column) -> Column:
    """Why a paper id is unusable, or null when it is a corpus id."""
    return F.when(col.isNull() | (F.trim(col) == ""), F.lit(MISSING_ID)).when(
        ~F.trim(col).rlike(CORPUS_ID_PATTERN), F.lit(INVALID_ID)
    )


def s2orc_papers(parsed: DataFrame, citations_from: str) -> DataFrame:
    """S2ORC metadata records -> normalised papers with their raw citation list `refs`."""
    r = lambda name: F.col(f"rec.{name}")  # noqa: E731
    refs_field = "outbound_citations" if citations_from == "outbound" else "inbound_citations"
    return parsed.select(
        F.trim(r("paper_id")).alias("id_raw"),
        nonblank(r("title")).alias("title"),
        nonblank(r("abstract")).alias("abstract"),
        to_year(r("year")).alias("year"),
        F.coalesce(nonblank(r("venue")), nonblank(r("journal"))).alias("venue"),
        F.coalesce(r("mag_field_of_study"), F.array().cast("array<string>")).alias("fields_of_study"),
        nonblank(r("doi")).alias("doi"),
        nonblank(r("pubmed_id")).alias("pubmed_id"),
        nonblank(r("pmc_id")).alias("pmc_id"),
        nonblank(r("arxiv_id")).alias("arxiv_id"),
        nonblank(r("acl_id")).alias("acl_id"),
        nonblank(r("mag_id")).alias("mag_id"),
        F.lit(None).cast("string").alias("dblp_id"),
        F.coalesce(r(refs_field), F.array().cast("array<string>")).alias("refs"),
        "parse_error",
        "source",
        "value",
    )


def s2ag_papers(parsed: DataFrame) -> DataFrame:
    """S2AG `papers` records -> normalised papers (abstract joined later)."""
    r = lambda name: F.col(f"rec.{name}")  # noqa: E731
    ext = lambda name: nonblank(F.col(f"rec.externalids.{name}"))  # noqa: E731
    categories = F.array_sort(
        F.array_distinct(
            F.filter(
                F.transform(F.coalesce(r("s2fieldsofstudy"), F.array()), lambda x: x["category"]),
                lambda c: c.isNotNull(),
            )
        )
    )
    return parsed.select(
        F.trim(r("corpusid")).alias("id_raw"),
        nonblank(r("title")).alias("title"),
        F.lit(None).cast("string").alias("abstract"),
        to_year(r("year")).alias("year"),
        F.coalesce(nonblank(r("venue")), nonblank(r("journal.name"))).alias("venue"),
        categories.alias("fields_of_study"),
        ext("DOI").alias("doi"),
        ext("PubMed").alias("pubmed_id"),
        ext("PubMedCentral").alias("pmc_id"),
        ext("ArXiv").alias("arxiv_id"),
        ext("ACL").alias("acl_id"),
        ext("MAG").alias("mag_id"),
        ext("DBLP").alias("dblp_id"),
        F.array().cast("array<string>").alias("refs"),
        "parse_error",
        "source",
        "value",
    )


def s2ag_abstracts(parsed: DataFrame) -> DataFrame:
    return parsed.select(
        F.trim(F.col("rec.corpusid")).alias("id_raw"),
        nonblank(F.col("rec.abstract")).alias("abstract"),
        "parse_error",
        "source",
        "value",
    )


def s2ag_citation_pairs(parsed: DataFrame) -> DataFrame:
    return parsed.select(
        F.trim(F.col("rec.citingcorpusid")).alias("citing_raw"),
        F.trim(F.col("rec.citedcorpusid")).alias("cited_raw"),
        "parse_error",
        "source",
        "value",
    )


def rejected_rows(
    df: DataFrame,
    *,
    kind: str,
    reason: Column,
    id_col: Column,
    cited: Column | None = None,
    raw: Column | None = None,
    keep: list[str] | tuple[str, ...] = (),
) -> DataFrame:
    """Rows of `df` in the `rejected` layout; `raw` is the line's bytes as read. `keep` names columns of `df`
    carried after the layout's (a row's `POSITION` in the table it was read from)."""
    return df.select(
        F.lit(kind).alias("kind"),
        reason.alias("reason"),
        id_col.cast("string").alias("id"),
        (cited if cited is not None else F.lit(None)).cast("string").alias("cited_id"),
        F.col("source"),
        (raw if raw is not None else F.lit(None)).cast("binary").alias("raw"),
        *keep,
    )


_FAILED_READ = re.compile(r"FAILED_READ_FILE[^\]]*\] Encountered error while reading file (?P<file>\S+?)\.?\s")
_CAUSE = re.compile(r"Caused by: (?P<cause>[^\n]+)")


def unreadable_file(exc: BaseException) -> tuple[str, str] | None:
    """(file, cause) when `exc` is Spark failing to read an input file (e.g. a truncated gzip), else None."""
    text = str(exc)
    found = _FAILED_READ.search(text)
    if found is None:
        return None
    cause = _CAUSE.search(text[found.end() :])
    return found["file"], (cause["cause"].strip() if cause else "unreadable")


# only Spark's own listing of an input path: a FileNotFoundException also names a missing jar or setting file
_VANISHED = re.compile(r"\[PATH_NOT_FOUND\] Path does not exist: (?P<path>\S+?)\.?(\s|$)")


def vanished_path(exc: BaseException) -> str | None:
    """The input path Spark found missing while a stage read it (moved or removed mid-run), else None."""
    found = _VANISHED.search(str(exc))
    return found["path"].removeprefix("file:").removeprefix("//") if found else None


def explaining_unreadable_files(build, what: str):
    """Call `build()`; a Spark read failure of an input file becomes one line naming the file, and so does an
    input that vanished while the stage ran."""
    from citeflow.errors import CiteflowError

    try:
        return build()
    except Exception as exc:
        gone = vanished_path(exc)
        if gone is not None:
            raise CiteflowError(
                f"{what} {gone} vanished while the stage read it (moved or removed during the run); put it back "
                "and run again"
            ) from None
        found = unreadable_file(exc)
        if found is None:
            raise
        file, cause = found
        file = file.removeprefix("file://")
        raise CiteflowError(
            f"{what} {file} cannot be read ({cause}); replace it with an intact copy or move it out of the folder"
        ) from None
