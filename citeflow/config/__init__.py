"""Typed, frozen configuration for a citeflow run.

One `@dataclass(frozen=True, kw_only=True)` per concern: `SparkConfig` (how
Spark runs: never part of an artifact's version), one `<Stage>Config` per
stage (what a stage computes: part of its version), and `RunConfig`, which
ties a snapshot, its input paths, the artifact root and the stage configs
together.

Command-line overrides look like `--set build_graph.citations_from=inbound`
and are parsed against the field's declared type (`apply_overrides`). Fields
whose metadata says `versioned=False` (performance knobs such as Spark's
master or output partitioning) change how a stage runs, not what it writes,
and are left out of the version hash (`versioned_dict`). Options added to a
stage after its versions existed say `versioned_when_set=True`: they enter
the hash only at a value other than their default.

The package's modules: `base` (ids, field helpers), `engines` (Spark, store), `stages`, `pbg` and
`encoder` (one config per stage), `run` (`RunConfig`, profiles) and `overrides` (text in and out). Everything is
imported from `citeflow.config`.
"""

from citeflow.config.base import SNAPSHOT_ID_RE, URI_PASSWORD, validate_snapshot_id
from citeflow.config.encoder import ENCODER_MAX_LENGTH, ENCODER_USAGE_FALLBACK, EmbedPapersConfig, TrainEncoderConfig
from citeflow.config.engines import InputsConfig, SparkConfig, StoreConfig
from citeflow.config.overrides import apply_overrides, describe, to_dict, versioned_dict
from citeflow.config.pbg import (
    PBG_DISTRIBUTED_KEYS,
    PBG_OPTIONS,
    PBG_STAGE_KEYS,
    RENDEZVOUS_RE,
    EmbedGraphConfig,
)
from citeflow.config.run import PROFILES, RunConfig, profile_overrides
from citeflow.config.stages import BenchmarkConfig, BuildGraphConfig, FilterLeakageConfig, MineTripletsConfig

__all__ = [
    "ENCODER_MAX_LENGTH",
    "ENCODER_USAGE_FALLBACK",
    "PBG_DISTRIBUTED_KEYS",
    "PBG_OPTIONS",
    "PBG_STAGE_KEYS",
    "PROFILES",
    "RENDEZVOUS_RE",
    "SNAPSHOT_ID_RE",
    "URI_PASSWORD",
    "BenchmarkConfig",
    "BuildGraphConfig",
    "EmbedGraphConfig",
    "EmbedPapersConfig",
    "FilterLeakageConfig",
    "InputsConfig",
    "MineTripletsConfig",
    "RunConfig",
    "SparkConfig",
    "StoreConfig",
    "TrainEncoderConfig",
    "apply_overrides",
    "describe",
    "profile_overrides",
    "to_dict",
    "validate_snapshot_id",
    "versioned_dict",
]
