"""THE LAB HANG (issue 13, item 4): a real CPU torchrun job (4 ranks, gloo) hung on purpose — rank 2's Dataset
read never returns, the others wait in the gradient all_reduce, nothing is printed — collected live with
`debugger collect`, then `debugger ask` must name rank 2 (data_loading_stall) from the dumps alone. The job is
killed afterwards. Skipped where torch (a lab python, $LAB_PYTHON or /tmp/labenv-deb/bin/python) or a py-spy that
can read that python is missing (CI has neither): eval/lab/hang.py documents the manual run."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from trainlog_debugger.eval.lab.hang import CULPRIT, run, verdict

from .conftest import DEBUGGER

LAB_PYTHON = os.environ.get("LAB_PYTHON", "/tmp/labenv-deb/bin/python")


def _lab_ready() -> str | None:
    """Why the lab cannot run here, or None."""
    if not os.path.exists(LAB_PYTHON):
        return f"no lab python at {LAB_PYTHON} (see eval/lab/hang.py)"
    if subprocess.run([LAB_PYTHON, "-c", "import torch.distributed"], capture_output=True, timeout=120).returncode:
        return f"{LAB_PYTHON} has no torch"
    from .conftest import pyspy_python
    if pyspy_python((LAB_PYTHON,)) is None:
        return "py-spy cannot read the lab python's processes here"
    return None


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One real lab run shared by the tests below (about 25 s)."""
    if (why := _lab_ready()):
        pytest.skip(why)
    out = tmp_path_factory.mktemp("lab") / "incident"
    # --pid of this job's workers: other suites running side by side on this machine hang their own lab job
    # (discovery of a torchrun agent's children is tested on a real process tree in test_discovery.py)
    return out, run(LAB_PYTHON, DEBUGGER, out, own_pids=True)


def test_a_real_hung_torchrun_job_collected_live_names_the_rank_reading_data(lab):
    out, res = lab
    assert res["hung"], res.get("console")
    assert res["collect_rc"] == 0, res["collect_out"]
    hosts = [d for d in out.iterdir() if d.is_dir()]
    assert len(hosts) == 1
    m = json.loads((hosts[0] / "collect.json").read_text())
    ranks = sorted(p["rank"] for p in m["processes"])
    assert ranks == [0, 1, 2, 3] and all(p["world_size"] == 4 and p["dumps"] for p in m["processes"])
    culprit = next(p for p in m["processes"] if p["rank"] == CULPRIT)
    dump = (hosts[0] / culprit["dumps"][0]).read_text()
    assert "_try_get_data (torch/utils/data/dataloader.py:" in dump
    cat, named = verdict(res["ask"])
    assert cat == "data_loading_stall" and CULPRIT in named, res["ask"] and res["ask"]["headline"]
    trigger = res["ask"]["chain"][0]["evidence"][0]
    assert trigger["rank"] == CULPRIT and "_try_get_data" in trigger["text"]


def test_only_that_rank_is_named(lab):
    assert verdict(lab[1]["ask"]) == ("data_loading_stall", [CULPRIT]), lab[1]["ask"]["headline"]
