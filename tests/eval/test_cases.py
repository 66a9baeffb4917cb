"""trainlog_debugger.eval.cases: truth.yaml parsing, case discovery, and the neutral copy that keeps names and labels from the
diagnosis."""

from __future__ import annotations

import os

import pytest

from trainlog_debugger.eval.synth import generate as g
from trainlog_debugger.eval.cases import CaseError, copy_bundle, discover, filter_tags, load_truth, neutral_bundle
from trainlog_debugger.eval.run import evaluate_case

SLUG = "gpu-oom-culprit-rank0-secret"


@pytest.fixture
def case_dir(tmp_path):
    job, truth = g.cuda_oom(ranks=8, culprit=0)
    d = tmp_path / "suite" / SLUG
    g.write_case(d, job, truth)
    (d / "sub").mkdir()
    (d / "sub" / "dmesg.log").write_text("[  1.0] NVRM: nothing\n")
    return d


def test_load_truth(case_dir):
    t = load_truth(case_dir / "truth.yaml")
    assert t.category == "oom" and t.culprit_ranks == (0,) and t.culprit_nodes == ("gpu-node-17",)
    assert "generated" in t.tags and not t.is_control


def test_unquoted_yaml_timestamp_and_bad_truths(tmp_path):
    p = tmp_path / "truth.yaml"
    p.write_text("category: oom\nculprit_ranks: [1]\nfirst_failure_time: 2024-11-05T12:04:45\n")
    assert load_truth(p).first_failure_time == "2024-11-05T12:04:45"
    for bad in ("category: cosmic_rays\n", "category: oom\nculprit_ranks: [one]\n", "- a list\n", "category: [\n"):
        p.write_text(bad)
        with pytest.raises(CaseError):
            load_truth(p)


def test_discover_case_or_folder_of_cases(case_dir, tmp_path):
    one = discover([case_dir])
    assert [c.id for c in one] == [f"suite/{SLUG}"]
    job, truth = g.port_in_use()
    g.write_case(case_dir.parent / "b-port", job, truth)
    (case_dir.parent / "not-a-case").mkdir()
    cases = discover([case_dir.parent])
    assert [c.id for c in cases] == ["suite/b-port", f"suite/{SLUG}"]
    assert [c.id for c in filter_tags(cases, ["startup"])] == ["suite/b-port"]
    assert [c.id for c in filter_tags(cases, ["startup", "crash"])] == ["suite/b-port", f"suite/{SLUG}"]
    assert filter_tags(cases, None) == cases
    assert discover([case_dir, case_dir.parent]) == [one[0], cases[0]]  # the same case twice counts once
    with pytest.raises(CaseError):
        discover([tmp_path / "nothing-here"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaseError):
        discover([tmp_path / "empty"])


def test_neutral_copy_hides_slug_path_and_truth(case_dir):
    with neutral_bundle(case_dir) as root:
        assert SLUG not in str(root) and str(case_dir) not in str(root) and "suite" not in str(root)
        assert root.name == "bundle" and root.parent.name.startswith("bundle-")
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        assert "truth.yaml" not in {os.path.basename(f) for f in files}
        assert files == sorted(["error-4891784-0.out", "error-4891784-1.out", "sub/dmesg.log"])
        for f in files:
            assert (root / f).read_bytes() == (case_dir / f).read_bytes()
    assert not root.exists() and not root.parent.exists()  # removed afterwards
    assert (case_dir / "truth.yaml").exists()  # the case is untouched


def test_links_out_of_the_case_are_left_out(case_dir, tmp_path):
    outside = tmp_path / "elsewhere.log"
    outside.write_text("secret\n")
    (case_dir / "link-out.log").symlink_to(outside)
    (case_dir / "link-in.log").symlink_to(case_dir / "sub" / "dmesg.log")
    (case_dir / "label.log").symlink_to(case_dir / "truth.yaml")
    dest = tmp_path / "copy"
    placed = copy_bundle(case_dir, dest)
    assert "link-in.log" in placed and "link-out.log" not in placed and "label.log" not in placed
    assert not any(p.is_symlink() for p in dest.rglob("*"))


def test_the_diagnosis_sees_only_the_neutral_copy(case_dir, monkeypatch):
    import trainlog_debugger.tools.pipeline as inv
    seen = {}
    real = inv.run

    def spy(bundle, **kw):
        seen["root"] = bundle.root
        seen["paths"] = [str(s.path) for s in bundle.sources] + [s.rel for s in bundle.sources]
        seen["skipped"] = [s.rel for s in bundle.skipped]
        return real(bundle, **kw)

    monkeypatch.setattr(inv, "run", spy)
    row = evaluate_case(discover([case_dir])[0], "offline")
    assert row["error"] is None and row["scores"]["category"] is True
    assert SLUG not in seen["root"] and "suite" not in seen["root"]
    assert not any(SLUG in p or "truth.yaml" in p for p in seen["paths"])
    assert not any("truth.yaml" in p for p in seen["skipped"])  # never even offered to the bundle


def test_the_split_is_a_hash_of_the_slug_one_in_three_test():
    from collections import Counter

    from trainlog_debugger.eval.cases import split_of
    got = Counter(split_of(f"project-{i}-some-failure") for i in range(3000))
    assert set(got) == {"dev", "test"} and 900 < got["test"] < 1100
    # fixed values: the split of an incident can never change with a release of this code
    assert [split_of(s) for s in ("nccl-1814-ib-completion-multinode", "pytorch-77562-fsdp-epoch-end-save-desync",
                                  "m4-tr141-exp6-slurm-node-failure")] == ["test", "dev", "test"]


def test_a_folder_of_case_folders_inside_a_path_is_discovered(tmp_path):
    from trainlog_debugger.eval.cases import discover
    for rel in ("gen-a", "real/inc-b", "real/inc-c"):
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "truth.yaml").write_text("category: network\nsplit: dev\n")
        (tmp_path / rel / "combined.log").write_text("x\n")
    assert [c.id for c in discover([tmp_path])] == [f"{tmp_path.name}/gen-a", "real/inc-b", "real/inc-c"]
