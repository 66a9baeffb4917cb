"""Scale-out on Dask (tools/bundle/distributed.py, issue 16): scan, diff and steps with DEBUGGER_CLUSTER pointing at a
LocalCluster of 2 worker processes give the local run's answer on bundled cases, with the batches really read by
the workers; archive members (in the bundle's private temp dir, which no worker sees) are read here; a batch whose
worker dies is read here with a note; a scheduler that cannot be reached is one line and exit 2.

The workers are separate processes: they import this module by name to run its remote helpers, so the repository
root is put on sys.path before they are spawned (they inherit it)."""

from __future__ import annotations

import json
import os
import socket
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from distributed import LocalCluster  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from trainlog_debugger.agent.cli.app import app  # noqa: E402
from trainlog_debugger.tools.bundle import distributed as dist  # noqa: E402
from trainlog_debugger.tools.bundle.distributed import ENV, TIMEOUT_ENV, ClusterError  # noqa: E402
from trainlog_debugger.tools.bundle.open import open_bundle  # noqa: E402
from trainlog_debugger.tools.bundle.parallel import Remote, map_sources  # noqa: E402
from trainlog_debugger.tools.jsonable import to_jsonable  # noqa: E402
from trainlog_debugger.tools.rankdiff.analyze import _diff_sources, diff_bundle  # noqa: E402
from trainlog_debugger.tools.scan.driver import scan_bundle  # noqa: E402
from trainlog_debugger.tools.scan.grep import grep_bundle  # noqa: E402
from trainlog_debugger.tools.steps.analyze import scan_steps  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "cases"
# multi-file cases of several shapes: 128 ranks in 128 files, a slowdown (steps), gloo over 8 ranks, a Slurm job,
# and AIStore logs whose daemons' logs are tar.gz archives beside plain worker logs (a mixed bundle)
GREP = r"timeout|error \d+"   # `debugger grep`: a user's regex, its engine object sent to the workers as it is
NAMES = ("gen-1024r-030", "gen-slow-128r-b", "lab-gloo8-a", "gen-slurm-8r-a", "gen-ais-8r-a")


@pytest.fixture(scope="module")
def cluster():
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))
    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    try:
        yield lc
    finally:
        dist.close()
        lc.close()
        if added:
            sys.path.remove(str(ROOT))


def _plain(rep) -> str:
    d = rep.to_json() if hasattr(rep, "to_json") else to_jsonable(rep)
    d.pop("seconds", None)
    return json.dumps(d, sort_keys=True, default=str)


def _ran(lc) -> dict[str, float]:
    """Compute seconds the cluster's workers have spent so far in each remote function (Dask's task prefix drops
    the leading underscore)."""
    tp = lc.scheduler.task_prefixes
    return {p: tp[p].all_durations.get("compute", 0.0) if p in tp else 0.0
            for p in ("remote_scan", "diff_sources", "remote_steps")}


@pytest.mark.slow
def test_scan_diff_steps_on_the_cluster_equal_the_local_run(cluster, monkeypatch):
    said = []
    for name in NAMES:
        with open_bundle(CASES / name) as b:
            monkeypatch.delenv(ENV, raising=False)
            local = scan_bundle(b), diff_bundle(b), scan_steps(b), grep_bundle(b, GREP, ignore_case=True)
            monkeypatch.setenv(ENV, cluster.scheduler_address)
            before = _ran(cluster)
            remote = scan_bundle(b), diff_bundle(b), scan_steps(b), grep_bundle(b, GREP, ignore_case=True)
            after = _ran(cluster)
        assert all(after[p] > before[p] for p in after), (name, before, after)  # each analysis went to the cluster
        assert remote[0].files == local[0].files, name                           # every kept hit, every count
        for lo, re_ in zip(local, remote):
            assert _plain(re_) == _plain(lo), name
        said.append((bool(local[0].patterns), bool(local[1].only or local[1].missing),
                     bool(local[2].outliers or local[2].regressions), bool(local[3].ranks)))
    assert all(map(any, zip(*said))), said  # the cases have something to say: hits, rank diffs, slow steps, greps


def _local_diff(seen: list):
    """`fn` of map_sources that records which files it read on this machine."""
    def fn(batch):
        seen.extend(s.rel for _, s in batch)
        return _diff_sources(batch)
    return fn


def _logs(name: str) -> list[Path]:
    return sorted(p for p in (CASES / name).rglob("*") if p.is_file() and p.name != "truth.yaml")


def test_archive_members_are_read_here_the_rest_by_the_workers(cluster, monkeypatch, tmp_path):
    logs, base = _logs("lab-gloo8-a"), CASES / "lab-gloo8-a"
    d = tmp_path / "bundle"
    for p in logs[2:]:
        (d / p.relative_to(base)).parent.mkdir(parents=True, exist_ok=True)
        (d / p.relative_to(base)).write_bytes(p.read_bytes())
    with tarfile.open(d / "first.tar.gz", "w:gz") as tf:
        for p in logs[:2]:
            tf.add(p, arcname=str(p.relative_to(base)))
    monkeypatch.setenv(ENV, cluster.scheduler_address)
    with open_bundle(d) as b:
        items = list(enumerate(b.sources))
        here: list[str] = []
        notes: list[str] = []
        before = _ran(cluster)["diff_sources"]
        got = list(map_sources(_local_diff(here), items, remote=Remote(_diff_sources), private=b.tmpdir,
                               notes=notes))
        members = sorted(s.rel for s in b.sources if s.rel.startswith("first.tar.gz!"))
    assert len(members) == 2 and len(items) == len(logs)
    assert sorted(here) == members                          # only the archive's members were read on this machine
    assert _ran(cluster)["diff_sources"] > before           # the rest by the workers
    assert sorted(f.rel for g in got for f in g.files) == sorted(s.rel for _, s in items)  # nothing lost
    assert notes == []


def test_an_archive_only_bundle_never_contacts_the_cluster(monkeypatch, tmp_path):
    logs, base = _logs("lab-gloo8-a"), CASES / "lab-gloo8-a"
    tar = tmp_path / "logs.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        for p in logs:
            tf.add(p, arcname=str(p.relative_to(base)))
    with open_bundle(tar) as b:
        assert len(b.sources) == len(logs)
        local = scan_bundle(b)
        monkeypatch.setenv(ENV, f"tcp://127.0.0.1:{_closed_port()}")  # fails in 1 s if contacted
        monkeypatch.setenv(TIMEOUT_ENV, "1")
        assert _plain(scan_bundle(b)) == _plain(local)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_scheduler_is_one_line_and_exit_2(monkeypatch):
    monkeypatch.setenv(ENV, f"tcp://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    with open_bundle(CASES / "gen-slurm-8r-a") as b, pytest.raises(ClusterError, match="not reachable"):
        scan_bundle(b)
    r = CliRunner().invoke(app, ["scan", str(CASES / "gen-slurm-8r-a")])
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cluster scheduler tcp://127.0.0.1:"), r.output


def test_without_distributed_installed_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
    monkeypatch.setenv(ENV, "tcp://127.0.0.1:1")
    with open_bundle(CASES / "gen-slurm-8r-a") as b, pytest.raises(ClusterError, match=r"\[cluster\]"):
        scan_bundle(b)


def test_a_file_no_worker_can_open_is_read_here_with_a_note(cluster, monkeypatch, tmp_path):
    """A worker that cannot open a file (not mounted there; here: removed after indexing) sends its batch back
    unread; this machine reads it, so the answer is the local one, plus a note saying what happened."""
    logs, base = _logs("lab-gloo8-a"), CASES / "lab-gloo8-a"
    for p in logs:
        (tmp_path / p.relative_to(base)).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p.relative_to(base)).write_bytes(p.read_bytes())
    with open_bundle(tmp_path) as b:
        gone = b.sources[-1]
        os.unlink(gone.path)
        monkeypatch.delenv(ENV, raising=False)
        local = scan_bundle(b)
        monkeypatch.setenv(ENV, cluster.scheduler_address)
        remote = scan_bundle(b)
    assert remote.files == local.files and next(f for f in local.files if f.rel == gone.rel).error
    extra = [n for n in remote.notes if n not in local.notes]
    assert len(extra) == 1 and extra[0].startswith("1 file(s) the cluster's workers could not open") \
        and gone.rel in extra[0]


def test_on_another_host_only_the_inode_must_match(tmp_path):
    """The same file on a shared filesystem has another st_dev on each host; another inode is another file."""
    f = tmp_path / "rank0.log"
    f.write_bytes(b"hello\n")
    st = f.stat()
    with open_bundle(tmp_path) as b:
        src = b.sources[0]
    assert src.ident == (st.st_dev, st.st_ino)
    moved = replace(src, ident=(st.st_dev + 1, st.st_ino))           # as indexed on the client's host
    assert dist._visible(moved, same_host=False).ident == src.ident   # read here, checked by inode
    assert dist._visible(moved, same_host=True) is moved              # same host: the device must match too
    other = replace(src, ident=(st.st_dev + 1, st.st_ino + 1))
    assert dist._visible(other, same_host=False) is other             # Source.open() refuses it, as locally
    assert dist._visible(replace(src, path=tmp_path / "absent.log"), same_host=False) is None


def _exit_worker(batch):
    """Remote helper: the worker process dies as if SIGKILLed (the OOM killer) while reading its batch."""
    os._exit(137)


def test_a_batch_whose_worker_dies_is_read_here_with_a_note(cluster, monkeypatch):
    cluster.scheduler.allowed_failures, kept = 0, cluster.scheduler.allowed_failures  # give up at the first death
    monkeypatch.setenv(ENV, cluster.scheduler_address)
    try:
        with open_bundle(CASES / "gen-8r-003") as b:
            items = list(enumerate(b.sources))
            here: list[str] = []
            notes: list[str] = []
            got = list(map_sources(_local_diff(here), items, remote=Remote(_exit_worker), notes=notes))
    finally:
        cluster.scheduler.allowed_failures = kept
    assert sorted(here) == sorted(s.rel for _, s in items)  # every batch died there, so every file was read here
    assert sorted(f.rel for g in got for f in g.files) == sorted(s.rel for _, s in items)
    assert len(notes) == 1 and "KilledWorker" in notes[0]


@pytest.mark.slow
def test_a_generated_cascade_names_the_same_culprit_on_the_cluster(cluster, monkeypatch, tmp_path):
    """Issue 28's at-scale hang, small: 64 ranks as 8 per-node torchrun outputs, one rank stalled in a data read
    and every other rank in the watchdog cascade. `ask` names the manifest's culprit locally, and the same with
    DEBUGGER_CLUSTER set, where the files were read by the workers."""
    from trainlog_debugger.eval.bench.logs import generate
    from trainlog_debugger.eval.bench.scan import culprits_of

    root, man = generate(tmp_path, 0.004, seed=5, ranks=64, scenario="cascade", layout="node")
    runner, said = CliRunner(), []
    for where in ("local", "cluster"):
        if where == "cluster":
            monkeypatch.setenv(ENV, cluster.scheduler_address)
        else:
            monkeypatch.delenv(ENV, raising=False)
        before = _ran(cluster)["remote_scan"]
        r = runner.invoke(app, ["ask", str(root), "--offline", "--json"])
        assert r.exit_code == 0, r.output
        assert (_ran(cluster)["remote_scan"] > before) == (where == "cluster")
        doc = json.loads(r.stdout)
        said.append((doc["status"], doc["category"], culprits_of(doc)))
    assert said[0] == said[1] == ("hung", "data_loading_stall", [man["plan"]["culprit"]])
