"""Inputs stay where the user pointed (`citeflow.inputs`): a link under an input folder that resolves outside
it is refused in one line before any work, unless `inputs.allow_outside`; the Airflow side's roots."""

from __future__ import annotations

import pytest

from citeflow.config import RunConfig, apply_overrides
from citeflow.errors import CiteflowError
from citeflow.inputs import check_input_folders, check_under_roots, input_folders, links_outside, parse_roots


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "release" / "corpus" / "metadata"
    folder.mkdir(parents=True)
    (folder / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    return folder.parent


def config(corpus, *overrides, **paths):
    return apply_overrides(RunConfig(snapshot="s", corpus=str(corpus), **paths), list(overrides))


def test_a_link_out_of_the_corpus_folder_is_refused_in_one_line(corpus):
    (corpus / "metadata" / "metadata_1.jsonl").symlink_to("/etc/passwd")
    with pytest.raises(CiteflowError) as caught:
        check_input_folders(config(corpus))
    assert str(caught.value) == (
        f"corpus file {corpus / 'metadata' / 'metadata_1.jsonl'} is a link to /etc/passwd, outside the corpus folder "
        f"{corpus}: copy the file into the folder, or set inputs.allow_outside=true if the link is meant"
    )
    check_input_folders(config(corpus, "inputs.allow_outside=true"))  # the user means it


def test_links_that_stay_inside_and_a_linked_folder_itself_are_read(corpus, tmp_path):
    (corpus / "metadata" / "again.jsonl").symlink_to(corpus / "metadata" / "metadata_0.jsonl")
    (corpus / "subset").symlink_to(corpus / "metadata")
    linked = tmp_path / "linked-corpus"
    linked.symlink_to(corpus)  # the folder the user names may itself be a link
    assert list(links_outside(str(corpus))) == []
    check_input_folders(config(linked))


def test_a_linked_folder_inside_that_leads_out_is_refused_without_walking_it(corpus, tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (corpus / "metadata" / "more").symlink_to(outside)
    assert list(links_outside(str(corpus))) == [(str(corpus / "metadata" / "more"), str(outside))]


@pytest.mark.parametrize(
    ("what", "make"),
    [
        ("SciDocs", lambda tmp: {"scidocs": str(tmp / "input")}),
        ("paper-ids", lambda tmp: {"paper_ids": str(tmp / "input")}),
    ],
)
def test_every_input_folder_is_checked(corpus, tmp_path, what, make):
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "paper_metadata_mag_mesh.json").symlink_to("/etc/hostname")
    with pytest.raises(CiteflowError, match=rf"^{what} file .* is a link to /etc/hostname, outside the {what} folder"):
        check_input_folders(config(corpus, **make(tmp_path)))


def test_model_benchmark_and_diffs_folders_are_inputs_too(corpus, tmp_path):
    for name in ("model", "beir", "scirepeval", "diffs"):
        (tmp_path / name).mkdir()
    (corpus.parent / "diffs").mkdir()  # a release's diffs/ beside its corpus/, found by build_graph.diffs=auto
    cfg = config(
        corpus,
        f"train_encoder.model={tmp_path / 'model'}",
        f"filter_leakage.beir={tmp_path / 'beir'}",
        f"benchmark.scirepeval={tmp_path / 'scirepeval'}",
    )
    assert {what for what, _ in input_folders(cfg)} == {"corpus", "diffs", "model", "BEIR", "SciRepEval"}
    assert ("diffs", str(corpus.parent / "diffs")) in input_folders(cfg)
    (tmp_path / "model" / "model.safetensors").symlink_to("/etc/hostname")
    with pytest.raises(CiteflowError, match=r"^model file .* outside the model folder"):
        check_input_folders(cfg)
    # an object store has no links: its paths are not walked
    remote = config(corpus, "train_encoder.model=small", "filter_leakage.beir=s3://bucket/beir")
    assert [what for what, _ in input_folders(remote)] == ["corpus", "diffs"]


def test_roots_are_parsed_and_enforced(tmp_path):
    assert parse_roots(f" {tmp_path} , {tmp_path}/b\n/srv:") == [str(tmp_path), str(tmp_path / "b"), "/srv"]
    assert parse_roots("") == [] and parse_roots(None) == []
    check_under_roots([("corpus", str(tmp_path / "x"))], [str(tmp_path)], "V")
    with pytest.raises(CiteflowError, match=r"^corpus folder /etc is outside the input folders this Airflow allows"):
        check_under_roots([("corpus", "/etc")], [str(tmp_path)], "V")
    sibling = f"{tmp_path}-sibling"  # a shared prefix is not a parent folder
    with pytest.raises(CiteflowError, match="is outside"):
        check_under_roots([("corpus", sibling)], [str(tmp_path)], "V")


def test_a_folder_far_larger_than_any_input_is_refused_in_one_line(corpus, monkeypatch):
    import citeflow.inputs as inputs

    monkeypatch.setattr(inputs, "MAX_ENTRIES", 1)  # the corpus holds a folder and a file
    with pytest.raises(CiteflowError, match=r"^the corpus folder .* holds more than 1 files and folders: name the"):
        check_input_folders(config(corpus))
