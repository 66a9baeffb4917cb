"""Finding the training processes of a live job from /proc (agent/collect/discovery.py), on a real process tree
this test starts: an agent named torchrun, its ranks (with torchrun's worker environment), each rank's own worker
process, and a helper child with no rank."""

from __future__ import annotations

import os
import sys

from trainlog_debugger.agent.collect.discovery import discover, is_torchrun_agent, read_proc



def test_the_ranks_are_the_agents_children_not_their_workers_nor_its_helper(job):
    procs, how = discover()
    mine = [p for p in procs if p.pid in job.pids]  # other jobs may run on this machine: look at ours only
    assert sorted(p.pid for p in mine) == sorted(job.ranks), how
    assert "torchrun" in how
    by_rank = {p.rank: p for p in mine}
    assert sorted(by_rank) == [0, 1, 2, 3]
    for r, pid in enumerate(job.ranks):
        p = by_rank[r]
        assert (p.pid, p.ppid, p.get("LOCAL_RANK"), p.get("WORLD_SIZE"), p.get("GROUP_RANK")) == \
            (pid, job.agent.pid, r, 4, 0)
        assert p.env["MASTER_ADDR"] == "127.0.0.1" and p.via == "torchrun_child"
        assert p.cmdline[1].endswith("train.py") and p.cmdline[2] == str(r)


def test_without_an_agent_the_topmost_processes_with_a_rank_env(tmp_path):
    # the fake agent is renamed so it is no agent: the ranks are then found by their environment, and each rank's
    # worker (which inherited RANK) is not counted as a second rank
    from .conftest import AGENT, RANK, Job, _children
    import subprocess
    import time
    d = tmp_path / "job"
    d.mkdir()
    (d / "launcher.py").write_text(AGENT)
    (d / "train.py").write_text(RANK)
    agent = subprocess.Popen([sys.executable, str(d / "launcher.py"), "3", "1", sys.executable, str(d / "train.py")],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    *ranks, helper = map(int, agent.stdout.readline().split())
    job = Job(agent, ranks, helper)
    try:
        deadline = time.monotonic() + 20
        while len(_children(set(ranks))) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = _children(set(ranks))
        assert len(workers) == 3
        procs, how = discover()
        if "torchrun" in how:  # a real torchrun job runs on this machine right now: its workers win, by design
            return
        found = {p.pid for p in procs}
        assert set(ranks) <= found and not (workers & found) and helper not in found and agent.pid not in found
        assert "RANK" in how
    finally:
        job.stop()


def test_pid_option_names_exactly_those(job):
    procs, how = discover([job.ranks[2], job.ranks[2], job.helper])
    assert [p.pid for p in procs] == [job.ranks[2], job.helper] and how.endswith("--pid")
    assert procs[0].rank == 2 and procs[1].rank is None and procs[1].env is not None


def test_the_collector_is_never_its_own_target(job):
    # run discovery as if the collector were rank 1 itself (srun starts it inside the job's allocation)
    procs, _ = discover(me=job.ranks[1])
    assert job.ranks[1] not in {p.pid for p in procs}


def test_agent_command_lines():
    yes = (["torchrun", "--nproc-per-node=8", "train.py"], ["/opt/venv/bin/torchrun", "train.py"],
           ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=2", "train.py"],
           ["python3.11", "-u", "-m", "torch.distributed.launch", "train.py"],
           ["/opt/venv/bin/python", "/opt/venv/bin/torchrun", "train.py"])
    no = (["python", "train.py", "--launcher", "torchrun"], ["python", "-m", "torch.distributed.elastic.agent"],
          ["bash", "-c", "torchrun train.py"], ["python", "-m", "torch.distributed.runner"], [])
    assert all(is_torchrun_agent(c) for c in yes)
    assert not any(is_torchrun_agent(c) for c in no)


def test_a_gone_process_and_an_unreadable_proc(tmp_path):
    assert read_proc(2**22 + 12345) is None
    # a fake /proc entry whose environ cannot be read: the rank stays unknown, the error is kept
    fake = tmp_path / "proc" / "77"
    fake.mkdir(parents=True)
    (fake / "stat").write_text("77 (python (x) y) S 1 77 77 0 -1 4194560")
    (fake / "cmdline").write_bytes(b"python\0train.py\0")
    p = read_proc(77, proc=tmp_path / "proc")
    assert (p.ppid, p.cmdline, p.env, p.rank) == (1, ["python", "train.py"], None, None) and "environ" in p.env_error
    (fake / "environ").write_bytes(b"PATH=/bin\0RANK=99999999999\0LOCAL_RANK=3\0")
    p = read_proc(77, proc=tmp_path / "proc")
    assert (p.rank, p.get("LOCAL_RANK")) == (None, 3)  # a rank past any job's size is not a rank
    assert os.getpid() not in {q.pid for q in discover(proc=tmp_path / "proc")[0]}
