import dataclasses

import pytest

from citeflow.config import BuildGraphConfig, RunConfig, SparkConfig, apply_overrides, versioned_dict
from citeflow.errors import CiteflowError


def base() -> RunConfig:
    return RunConfig(snapshot="s1", corpus="/data/c")


@pytest.mark.parametrize("bad", ["../etc", "/abs", "a/b", "", ".hidden", "-x", "a b", "x" * 129, "snap\n"])
def test_snapshot_ids_that_look_like_paths_are_refused(bad):
    with pytest.raises(CiteflowError, match="invalid snapshot id"):
        RunConfig(snapshot=bad, corpus="/data/c")


@pytest.mark.parametrize("good", ["20200705v1", "2023-08-29", "a", "Release_1.2"])
def test_valid_snapshot_ids(good):
    assert RunConfig(snapshot=good, corpus="c").snapshot == good


def test_overrides_are_parsed_against_field_types():
    cfg = apply_overrides(
        base(),
        [
            "build_graph.citations_from=inbound",
            "spark.shuffle_partitions=3",
            "spark.conf=spark.a=1,spark.b=2",
            "build_graph.output_files=5",
        ],
    )
    assert cfg.build_graph.citations_from == "inbound"
    assert cfg.spark.shuffle_partitions == 3
    assert cfg.spark.conf == ("spark.a=1", "spark.b=2")
    assert cfg.build_graph.output_files == 5
    assert base().build_graph.citations_from == "outbound"  # the original is untouched (frozen)


@pytest.mark.parametrize(
    "override, message",
    [
        ("build_graph.nope=1", "unknown setting 'build_graph.nope'"),
        ("nothing=1", "unknown setting 'nothing'"),
        ("spark.shuffle_partitions=many", "expects an integer"),
        ("build_graph.format=xml", "must be one of auto, s2orc, s2ag"),
        ("spark.shuffle_partitions=0", "at least 1"),
        ("build_graph", "must look like stage.key=value"),
        ("spark=1", "is a section"),
        ("spark.driver_memory=lots", "not a JVM size"),
    ],
)
def test_bad_overrides_name_the_problem(override, message):
    with pytest.raises(CiteflowError, match=message):
        apply_overrides(base(), [override])


def test_only_versioned_fields_enter_the_version():
    # output_files changes how the data is laid out, not what it is.
    assert versioned_dict(BuildGraphConfig()) == {"format": "auto", "citations_from": "outbound"}
    assert versioned_dict(SparkConfig()) == {}
    changed = dataclasses.replace(BuildGraphConfig(), output_files=99)
    assert versioned_dict(changed) == versioned_dict(BuildGraphConfig())


def test_distributed_pbg_needs_two_partitions_per_machine():
    with pytest.raises(CiteflowError, match="num_partitions >= 8"):
        apply_overrides(base(), ["embed_graph.pbg=num_machines=4", "embed_graph.num_partitions=4"])
    cfg = apply_overrides(base(), ["embed_graph.num_partitions=8", "embed_graph.pbg=num_machines=4"])
    assert cfg.embed_graph.pbg == ("num_machines=4",)


def test_profiles_shrink_only_what_they_name():
    from citeflow.config import profile_overrides

    demo = apply_overrides(base(), list(profile_overrides("demo")))
    assert demo.embed_graph.dimension == 64 and base().embed_graph.dimension == 768
    assert apply_overrides(base(), list(profile_overrides("full"))) == base()
    with pytest.raises(CiteflowError, match="unknown profile"):
        profile_overrides("huge")
