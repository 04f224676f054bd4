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
    with pytest.raises(CiteflowError, match="num_partitions >= 8, not 4"):
        apply_overrides(base(), ["embed_graph.num_partitions=4", "embed_graph.machines=4"])
    with pytest.raises(CiteflowError, match="num_partitions >= 4, not 1"):
        apply_overrides(base(), ["embed_graph.machines=2"])
    cfg = apply_overrides(base(), ["embed_graph.num_partitions=8", "embed_graph.machines=4"])
    assert cfg.embed_graph.machines == 4 and cfg.embed_graph.launch == "local"
    with pytest.raises(CiteflowError, match="machines must be at least 1"):
        apply_overrides(base(), ["embed_graph.machines=0"])


def test_overrides_apply_in_any_order_and_the_last_of_one_key_wins():
    pairs = ["embed_graph.num_partitions=4", "embed_graph.machines=2"]
    assert apply_overrides(base(), pairs) == apply_overrides(base(), pairs[::-1])
    external = ["embed_graph.machines=2", "embed_graph.num_partitions=4", "embed_graph.launch=external"]
    cfg = apply_overrides(base(), [*external, "embed_graph.rendezvous=tcp://10.0.0.1:29500"])
    assert cfg == apply_overrides(base(), ["embed_graph.rendezvous=tcp://10.0.0.1:29500", *external[::-1]])
    again = apply_overrides(base(), ["embed_graph.num_epochs=3", "embed_graph.num_epochs=5"])
    assert again.embed_graph.num_epochs == 5
    # a combination that is wrong stays wrong, whatever the order
    with pytest.raises(CiteflowError, match="num_partitions >= 4, not 2"):
        apply_overrides(base(), ["embed_graph.machines=2", "embed_graph.num_partitions=2"])


def test_machines_and_where_ranks_meet_do_not_change_the_version():
    from citeflow.config import EmbedGraphConfig

    spread = apply_overrides(
        base(),
        [
            "embed_graph.num_partitions=4",
            "embed_graph.machines=2",
            "embed_graph.rendezvous=tcp://pbg-0.cluster:29500",
            "embed_graph.launch=external",
            "embed_graph.rank_wait_s=60",
        ],
    )
    plain = apply_overrides(base(), ["embed_graph.num_partitions=4"])
    assert versioned_dict(spread.embed_graph) == versioned_dict(plain.embed_graph)
    assert versioned_dict(EmbedGraphConfig(num_partitions=8)) != versioned_dict(plain.embed_graph)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["embed_graph.rendezvous=file:///tmp/x"], "must look like tcp://HOST:PORT"),
        (["embed_graph.rendezvous=env://"], "must look like tcp://HOST:PORT"),
        (["embed_graph.rendezvous=tcp://host:0"], "port 1-65535"),
        (["embed_graph.rendezvous=tcp://host:70000"], "port 1-65535"),
        (["embed_graph.rendezvous=tcp://a/b:1"], "must look like tcp://HOST:PORT"),
        (["embed_graph.num_partitions=4", "embed_graph.machines=2", "embed_graph.launch=external"], "needs embed"),
        (["embed_graph.rank_wait_s=0"], "rank_wait_s must be above 0"),
        (["embed_graph.pbg=num_machines=4"], "num_machines is set by the stage .*: use embed_graph.machines"),
        (["embed_graph.pbg=distributed_init_method=tcp://h:1"], "use embed_graph.rendezvous"),
        (["embed_graph.pbg=num_partition_servers=2"], "must be -1 .* or 0"),
    ],
)
def test_distributed_settings_are_checked(overrides, message):
    with pytest.raises(CiteflowError, match=message):
        apply_overrides(base(), overrides)


@pytest.mark.parametrize(
    "value", ["tcp://127.0.0.1:29500", "tcp://*:29500", "tcp://pbg-0.example.org:1", "tcp://[::1]:80"]
)
def test_rendezvous_addresses_accepted(value):
    assert apply_overrides(base(), [f"embed_graph.rendezvous={value}"]).embed_graph.rendezvous == value


def test_profiles_shrink_only_what_they_name():
    from citeflow.config import profile_overrides

    demo = apply_overrides(base(), list(profile_overrides("demo")))
    assert demo.embed_graph.dimension == 64 and base().embed_graph.dimension == 768
    assert apply_overrides(base(), list(profile_overrides("full"))) == base()
    with pytest.raises(CiteflowError, match="unknown profile"):
        profile_overrides("huge")


@pytest.mark.parametrize(
    "override", ["train_encoder.lr=nan", "train_encoder.bitfit_lr=inf", "embed_graph.margin=-inf", "embed_graph.lr=NaN"]
)
def test_nan_and_inf_are_not_settings(override):
    with pytest.raises(CiteflowError, match="expects a finite number"):
        apply_overrides(base(), [override])


def test_nan_is_refused_when_a_config_is_built_directly_too():
    from citeflow.config import EmbedGraphConfig, TrainEncoderConfig

    with pytest.raises(CiteflowError, match="train_encoder.lr must be a finite number"):
        TrainEncoderConfig(lr=float("nan"))
    with pytest.raises(CiteflowError, match="embed_graph.margin must be a finite number"):
        EmbedGraphConfig(margin=float("inf"))


@pytest.mark.parametrize(
    "entry, message",
    [
        ("checkpoint_path=/elsewhere", "checkpoint_path is set by the stage"),
        ("entity_path=/tmp/x", "entity_path is set by the stage"),
        ('edge_paths=["/tmp/x"]', "edge_paths is set by the stage"),
        ("init_path=/home/me/ckpt", "init_path is set by the stage"),
        ("relations=[]", "relations is set by the stage"),
        ("distributed_init_method=file:///tmp/rendezvous", "distributed_init_method is set by the stage"),
        ("no_such_option=1", "'no_such_option' is not a PyTorch-BigGraph option"),
        ("lr=nan", "lr must be a finite number"),
    ],
)
def test_pbg_paths_and_layout_cannot_be_overridden(entry, message):
    with pytest.raises(CiteflowError, match=message):
        apply_overrides(base(), [f"embed_graph.pbg={entry}"])


def test_pbg_options_that_change_only_training_are_accepted():
    cfg = apply_overrides(
        base(),
        [
            "embed_graph.pbg=init_scale=0.01,num_partition_servers=0,checkpoint_preservation_interval=2",
        ],
    )
    assert cfg.embed_graph.pbg == (
        "init_scale=0.01",
        "num_partition_servers=0",
        "checkpoint_preservation_interval=2",
    )


def test_the_pbg_option_list_is_pbgs_own():
    """PBG_OPTIONS must be exactly torchbiggraph's ConfigSchema fields (the reference's own list)."""
    attr = pytest.importorskip("attr")
    config = pytest.importorskip("torchbiggraph.config")
    from citeflow.config import PBG_OPTIONS

    assert PBG_OPTIONS == {f.name for f in attr.fields(config.ConfigSchema)}


@pytest.mark.parametrize("field", ["corpus", "artifacts", "scidocs", "paper_ids"])
def test_a_password_in_a_uri_is_refused(field):
    values = {"snapshot": "s1", "corpus": "/c", field: "s3://AKIA:s3cr3t@bucket/x"}
    with pytest.raises(CiteflowError, match="a password in the URI is not accepted") as caught:
        RunConfig(**values)
    assert "s3cr3t" not in str(caught.value)


def test_a_malformed_spark_conf_entry_is_reported_without_its_secret():
    with pytest.raises(CiteflowError, match="must look like spark.some.key=value") as caught:
        apply_overrides(base(), ["spark.conf=fs.s3a.secret.key=s3cr3t"])
    assert "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize(
    "override, message",
    [
        ("store.lease_wait_s=-1", "lease_wait_s must be at least 0"),
        ("store.lease_stale_s=5", "more than twice"),
        ("store.lease_heartbeat_s=inf", "finite number"),
    ],
)
def test_store_settings_are_checked(override, message):
    with pytest.raises(CiteflowError, match=message):
        apply_overrides(base(), [override])


# mine_triplets' versioned fields before the reference-sampler options were added
MINE_TRIPLETS_VERSIONED = [
    "strategy", "pool_size", "num_queries", "positives", "hard_negatives", "easy_negatives", "k_pos", "k_hard",
    "windows", "reference_pool", "easy_negatives_from", "distinct_easy_negatives", "index", "nlist", "nprobe",
    "hnsw_m", "ef_search", "pq_m", "recall_sample", "rank_sample", "seed",
]  # fmt: skip


@pytest.mark.parametrize(
    "override", ["mine_triplets.easy_negatives_sampling=window", "mine_triplets.specter_query_rule=parallel"]
)
def test_a_reference_sampler_option_enters_the_version_only_when_set(override):
    from citeflow.config import MineTripletsConfig
    from citeflow.manifest import compute_version

    # at their defaults the options leave the versions built before they existed as they were
    assert list(versioned_dict(MineTripletsConfig())) == MINE_TRIPLETS_VERSIONED
    changed = apply_overrides(base(), [override]).mine_triplets
    name, value = override.removeprefix("mine_triplets.").split("=")
    assert versioned_dict(changed) == {**versioned_dict(MineTripletsConfig()), name: value}
    assert compute_version("mine_triplets", 2, versioned_dict(changed), []) != compute_version(
        "mine_triplets", 2, versioned_dict(MineTripletsConfig()), []
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["mine_triplets.easy_negatives_sampling=random"], "must be one of uniform, window"),
        (["mine_triplets.specter_query_rule=serial"], "must be one of generator, parallel"),
        (
            ["mine_triplets.easy_negatives_sampling=window", "mine_triplets.easy_negatives_from=pool"],
            "window reads SciNCL's list of the queries: set mine_triplets.easy_negatives_from=queries",
        ),
    ],
)
def test_reference_sampler_options_are_checked(overrides, message):
    with pytest.raises(CiteflowError, match=message):
        apply_overrides(base(), overrides)


def test_every_numeric_setting_has_its_range_in_its_field_shown_and_checked(capsys):
    import dataclasses
    import typing

    from citeflow.jobs.cli import main

    defaults = RunConfig(snapshot="x", corpus="x")
    numeric = []
    for section in dataclasses.fields(RunConfig):
        value = getattr(defaults, section.name)
        if not dataclasses.is_dataclass(value):
            continue
        hints = typing.get_type_hints(type(value))
        for f in dataclasses.fields(value):
            if {int, float} & set(typing.get_args(hints[f.name]) or (hints[f.name],)):
                assert "range" in f.metadata, f"{section.name}.{f.name} has no range"
                numeric.append(f"{section.name}.{f.name}")
    assert len(numeric) > 60
    assert main(["settings"]) == 0
    assert "triplet loss margin: L2 distance (triplet) or cosine distance (triplet_cosine) [above 0]" in (
        capsys.readouterr().out
    )
    for override, message in (
        ("train_encoder.margin=-1", "train_encoder.margin must be above 0, not -1.0"),
        ("embed_graph.lr=-1", "embed_graph.lr must be above 0, not -1.0"),
        ("train_encoder.max_length=0", "train_encoder.max_length must be at least 1 and at most 8192, not 0"),
        ("mine_triplets.seed=-3", "mine_triplets.seed must be at least 0, not -3"),
    ):
        with pytest.raises(CiteflowError, match=message):
            apply_overrides(base(), [override])
