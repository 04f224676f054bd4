"""The defaults of embed_graph, mine_triplets and train_encoder against the reference settings, item by item.

Each row names the reference file (repository @ commit) and the value read there. Commits:
malteos/scincl @ f10a310, allenai/specter @ f7afbc9, facebookresearch/PyTorch-BigGraph 1.0.0 (the installed
package, whose ConfigSchema supplies every default SciNCL leaves unset). A citeflow setting that differs
from the reference on purpose is not in these tables but a named option (see the README's tables).
"""

import math

import attr
import pytest

from citeflow.config import ENCODER_USAGE_FALLBACK, EmbedGraphConfig, MineTripletsConfig, TrainEncoderConfig
from citeflow.models.triplets import mining as T

SCINCL_PBG = "malteos/scincl biggraph_configs/s2orc_without_scidocs.py"
# (PBG key, SciNCL's value, where)
PBG_ROWS = [
    ("dimension", 768, f'{SCINCL_PBG}: "dimension": 768'),
    ("max_norm", 1.0, f'{SCINCL_PBG}: "max_norm": 1.0'),
    ("global_emb", False, f'{SCINCL_PBG}: "global_emb": False'),
    ("comparator", "dot", f'{SCINCL_PBG}: "comparator": "dot"'),
    ("num_epochs", 20, f'{SCINCL_PBG}: "num_epochs": 20 (w/o leakage; 30 commented out)'),
    ("num_edge_chunks", 10, f'{SCINCL_PBG}: "num_edge_chunks": 10'),
    ("batch_size", 10_000, f'{SCINCL_PBG}: "batch_size": 10_000'),
    ("num_uniform_negs", 0, f'{SCINCL_PBG}: "num_uniform_negs": 0'),
    ("margin", 0.15, f'{SCINCL_PBG}: "margin": 0.15'),
    ("lr", 0.1, f'{SCINCL_PBG}: "lr": 0.1'),
    ("eval_fraction", 0, f'{SCINCL_PBG}: "eval_fraction": 0'),
]
# Settings that do not change the embeddings, or that citeflow sets from its own layout.
PBG_NOT_COMPARED = {
    "entity_path": "citeflow's import folder",
    "edge_paths": "citeflow's import folder",
    "checkpoint_path": "citeflow's run folder",
    "checkpoint_preservation_interval": "SciNCL keeps every 10th epoch's checkpoint; citeflow keeps the last",
    "workers": "a performance knob (embed_graph.workers)",
    "entities": "compared below: one entity type, one partition",
    "relations": "compared below: one relation, operator none",
}


def scincl_pbg_config(tmp_path) -> dict:
    config = {
        "entity_path": str(tmp_path / "entities"),
        "edge_paths": [str(tmp_path / "edges_all")],
        "checkpoint_path": str(tmp_path / "mining" / "checkpoint"),
        "entities": {"paper_id": {"num_partitions": 1}},
        "relations": [{"name": "citation", "lhs": "paper_id", "rhs": "paper_id", "operator": "none"}],
    }
    config.update({key: value for key, value, _ in PBG_ROWS})
    return config


def test_embed_graph_defaults_give_scincls_pbg_config_field_by_field(tmp_path):
    from citeflow.models.pbg import compat as pbg_compat

    pbg_compat.apply()
    from torchbiggraph.config import ConfigSchema

    from citeflow.models.pbg.launch import pbg_settings

    ours = ConfigSchema.from_dict(pbg_settings(EmbedGraphConfig(), tmp_path, "edges_all", "mining", workers=2))
    reference = ConfigSchema.from_dict(scincl_pbg_config(tmp_path))
    for key, value, where in PBG_ROWS:
        assert getattr(ours, key) == value, f"{key}: citeflow {getattr(ours, key)!r}, {where}"
    # every other PBG setting: PBG's own default in both, since SciNCL leaves it unset
    for field in attr.fields(ConfigSchema):
        if field.name not in PBG_NOT_COMPARED:
            assert getattr(ours, field.name) == getattr(reference, field.name), field.name
    assert [e.num_partitions for e in ours.entities.values()] == [1]
    ((relation,),) = [ours.relations]
    assert (relation.operator, relation.lhs == relation.rhs, relation.all_negs) == ("none", True, False)
    assert EmbedGraphConfig().holdout == 0.01  # docs/reference.md §3: 1% of edges held out for link prediction


SCINCL_README = "malteos/scincl README.md, the run_specter command"
MINE_ROWS = [
    ("pool_size", 680_967, "SciNCL paper §4 (docs/reference.md §4): the training pool of 680,967 papers"),
    ("num_queries", 136_820, "malteos/scincl cli_specter.py find_train_ids docstring: query papers = 136,820"),
    ("positives", 5, f"{SCINCL_README}: --triples_per_query 5 --easy_positives_count 5"),
    ("hard_negatives", 2, f"{SCINCL_README}: --hard_negatives_count 2"),
    ("easy_negatives", 3, f"{SCINCL_README}: --easy_negatives_count 3 --easy_negatives_strategy random_without_knn"),
    ("k_pos", 25, f"{SCINCL_README}: --easy_positives_k_min 20 --easy_positives_k_max 25"),
    ("k_hard", 4000, f"{SCINCL_README}: --hard_negatives_k_min 3998 --hard_negatives_k_max 4000"),
    ("index", "flat", f"{SCINCL_README}: ANN_FAISS_FACTORY=Flat"),
    ("easy_negatives_from", "queries", "malteos/scincl gdt/triples_miner/sampling.py init_randoms: items = queries"),
    ("windows", "absolute", "SciNCL's k are ranks (the relative windows go beyond the references)"),
]


def test_mine_triplets_defaults_are_scincls():
    cfg = MineTripletsConfig()
    for key, value, where in MINE_ROWS:
        assert getattr(cfg, key) == value, f"{key}: citeflow {getattr(cfg, key)!r}, {where}"
    windows, warnings = T.fit_windows(
        cfg.pool_size, cfg.k_pos, cfg.k_hard, cfg.positives, cfg.hard_negatives, cfg.easy_negatives
    )
    # nearest_idxs[20:25] and nearest_idxs[3998:4000] of the reference, the query excluded: ranks 21-25, 3999-4000
    assert windows.positive_ranks.tolist() == [21, 22, 23, 24, 25] and windows.hard_ranks.tolist() == [3999, 4000]
    assert warnings == []


SPECTER_FILES = "allenai/specter specter/data_utils/create_training_files.py argparse defaults"


def test_mine_triplets_defaults_are_specters_for_the_specter_strategy():
    cfg = MineTripletsConfig(strategy="specter")
    # samples_per_query 5, ratio_hard_negatives 0.3: ceil(0.3 x 5) = 2 hard, the rest easy
    assert cfg.positives == 5, f"{SPECTER_FILES}: --samples_per_query 5"
    assert cfg.hard_negatives == math.ceil(0.3 * 5) == 2, f"{SPECTER_FILES}: --ratio_hard_negatives 0.3"
    assert cfg.easy_negatives == 5 - 2


SCINCL_TRAIN = "malteos/scincl cli_model.py"
SPECTER_CONFIG = "allenai/specter experiment_configs/simple.jsonnet"
HF_TRAINER = "transformers 4.5.1 TrainingArguments defaults, which SciNCL's cli_model.py leaves unset"
TRAIN_ROWS = [
    ("lr", 2e-5, f"{SCINCL_TRAIN}: DEFAULT_LEARNING_RATE = 2e-5 (SPECTER paper 2e-5; simple.jsonnet 3e-5)"),
    ("epochs", 2, f"{SCINCL_TRAIN}: DEFAULT_NUM_TRAIN_EPOCHS = 2; allenai/specter scripts/run-exp-simple.sh 2"),
    ("batch_size", 32, f"{SCINCL_TRAIN}: target_batch_size = 32; {SPECTER_CONFIG}: gradient_accumulation 32"),
    ("margin", 1.0, "malteos/scincl gdt/models/__init__.py: TripletMarginLoss(margin=1.0, p=2)"),
    ("pooling", "cls", f"{SCINCL_TRAIN}: pooling_strategy = PoolingStrategy.CLS"),
    ("max_length", 512, f"{SCINCL_TRAIN}: max_sequence_length = 512"),
    ("max_grad_norm", 1.0, f"{SPECTER_CONFIG}: grad_clipping 1; {HF_TRAINER}: max_grad_norm 1.0"),
    ("weight_decay", 0.01, f"{SPECTER_CONFIG}: weight_decay 0.01, 0 for bias and LayerNorm"),
    ("warmup_fraction", 0.1, f"{SPECTER_CONFIG}: slanted_triangular cut_frac 0.1"),
    ("bitfit", False, f"{SCINCL_TRAIN}: bitfit = False"),
    ("bitfit_lr", 1e-4, "SciNCL paper, BitFit (docs/reference.md §5): lr 1e-4"),
]


def resolved_training(cfg: TrainEncoderConfig) -> dict:
    """The settings a run uses from a model folder without sentence-transformers files (SciBERT's): pooling,
    max length and normalisation left unset take the fallback."""
    from citeflow.models.encoder.folder import resolve_usage

    chosen = {name: getattr(cfg, name) for name in ENCODER_USAGE_FALLBACK}
    return {**{f: getattr(cfg, f) for f in cfg.__dataclass_fields__}, **resolve_usage(chosen, {}).values}


def test_train_encoder_defaults_are_the_references():
    cfg = TrainEncoderConfig()
    assert (cfg.pooling, cfg.max_length, cfg.normalize) == (None, None, None)  # the model folder may say them
    resolved = resolved_training(cfg)
    for key, value, where in TRAIN_ROWS:
        assert resolved[key] == value, f"{key}: citeflow {resolved[key]!r}, {where}"
    # both start from SciBERT: the default names no model at all, so a run must pick one (never 'small')
    assert cfg.model == ""


def test_the_optimizer_is_adamw_with_hf_trainers_betas_and_epsilon():
    import torch

    from citeflow.models.training.step import adamw

    model = torch.nn.Sequential()
    model.add_module("dense", torch.nn.Linear(2, 2))
    model.add_module("LayerNorm", torch.nn.LayerNorm(2))
    optimizer = adamw(model, 2e-5, 0.01)
    # HF TrainingArguments (SciNCL): adam_beta1 0.9, adam_beta2 0.999, adam_epsilon 1e-8
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["eps"] == 1e-8
    assert optimizer.defaults["betas"] == (0.9, 0.999)
    decayed, exempt = optimizer.param_groups
    assert decayed["weight_decay"] == 0.01 and exempt["weight_decay"] == 0.0
    assert [p.shape for p in decayed["params"]] == [(2, 2)]  # dense.weight; its bias and LayerNorm are exempt
    assert len(exempt["params"]) == 3


@pytest.mark.parametrize("profile", ["demo", "pretrained-cpu", "full"])
def test_profiles_keep_the_reference_settings_they_do_not_name(profile):
    from citeflow.config import RunConfig, apply_overrides, profile_overrides

    named = {item.split("=", 1)[0] for item in profile_overrides(profile)}
    cfg = apply_overrides(RunConfig(snapshot="s", corpus="c"), list(profile_overrides(profile)))
    sections = {"embed_graph": cfg.embed_graph, "mine_triplets": cfg.mine_triplets}
    sections = {name: {f: getattr(c, f) for f in dir(c) if not f.startswith("_")} for name, c in sections.items()}
    sections["train_encoder"] = resolved_training(cfg.train_encoder)
    for section, rows in (("embed_graph", PBG_ROWS), ("mine_triplets", MINE_ROWS), ("train_encoder", TRAIN_ROWS)):
        for key, value, _ in rows:
            if f"{section}.{key}" not in named and key in sections[section]:
                assert sections[section][key] == value, f"{profile}: {section}.{key}"
