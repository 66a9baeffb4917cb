"""Stack dumps of a hung job (issue 13, item 1), read STAT-style: every rank's main-thread stack grouped by where it
is; the few ranks somewhere the others are not never reached the collective, and their frames say why. py-spy
text and faulthandler formats, one file per rank, at 8 and 1,024 ranks."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.pipeline import investigate, run
from trainlog_debugger.tools.sources.pyspy.report import parse, summary_lines

WAITING = [("wait", "torch/distributed/distributed_c10d.py:4130"),
           ("all_reduce", "torch/distributed/distributed_c10d.py:2501"),
           ("_allreduce_grads", "megatron/core/distributed/param_and_grad_buffer.py:412"),
           ("train_step", "/workspace/train.py:210"), ("<module>", "/workspace/train.py:301")]
LOADING = [("_try_get_data", "torch/utils/data/dataloader.py:1011"),
           ("_get_data", "torch/utils/data/dataloader.py:1162"), ("_next_data", "torch/utils/data/dataloader.py:1318"),
           ("__next__", "torch/utils/data/dataloader.py:630"), ("train_step", "/workspace/train.py:188"),
           ("<module>", "/workspace/train.py:301")]
SAVING = [("write", "torch/serialization.py:652"), ("_save", "torch/serialization.py:866"),
          ("save", "torch/serialization.py:629"), ("save_checkpoint", "/workspace/ckpt.py:77"),
          ("<module>", "/workspace/train.py:305")]


def pyspy(pid: int, frames) -> str:
    return "\n".join([f"Process {pid}: /usr/bin/python3 -u train.py --config gpt.yaml",
                      "Python v3.10.12 (/usr/bin/python3.10)", "",
                      f'Thread {pid + 7} (idle): "pt_autograd_0"', "    wait (threading.py:320)",
                      f'Thread {pid} (idle): "MainThread"'] + [f"    {f} ({w})" for f, w in frames]) + "\n"


def faulthandler(frames) -> str:
    out = ["Thread 0x00007f3b2c1ff700 (most recent call first):",
           '  File "/usr/lib/python3.10/threading.py", line 320 in wait', "",
           "Current thread 0x00007f3b3e5d4740 (most recent call first):"]
    for f, w in frames:
        path, ln = w.rsplit(":", 1)
        out.append(f'  File "/usr/lib/python3/dist-packages/{path}", line {ln} in {f}')
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("world,odd", [(8, 5), (1024, 517)])
@pytest.mark.parametrize("fmt", ["pyspy", "faulthandler"])
def test_the_rank_reading_data_is_named_from_dumps_alone(tmp_path, world, odd, fmt):
    for r in range(world):
        frames = LOADING if r == odd else WAITING
        text = pyspy(4000 + r, frames) if fmt == "pyspy" else faulthandler(frames)
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(text)
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks, d.status.value) == ("data_loading_stall", [odd], "hung"), d.headline
    assert "_try_get_data" in d.chain[0].evidence[0].text and d.chain[0].evidence[0].file == f"rank_{odd}.pyspy.txt"
    assert f"{world - 1} processes in wait ← all_reduce" in d.headline


def test_a_rank_saving_a_checkpoint_is_storage(tmp_path):
    for r in range(8):
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(pyspy(4000 + r, SAVING if r == 0 else WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks) == ("storage_io", [0]), d.headline


def test_every_rank_in_the_same_collective_is_no_culprit(tmp_path):
    for r in range(8):
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(pyspy(4000 + r, WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.culprit_ranks == [] and d.category == "network" and d.status.value == "inconclusive", d.headline


def test_stat_style_summary_and_rank_prefixed_dumps_in_one_file():
    text = "".join(f"[rank{r}]: " + ln + "\n" for r in range(4) for ln in
                   faulthandler(LOADING if r == 2 else WAITING).splitlines())
    stacks = parse("all_ranks.txt", text)
    assert sorted(s.rank for s in stacks) == [0, 1, 2, 3]
    assert summary_lines(stacks) == ["3 ranks in wait ← all_reduce ← _allreduce_grads",
                                     "rank 2 in _try_get_data ← _get_data ← _next_data"]


def test_a_dump_read_only_in_part_says_so(tmp_path, monkeypatch):
    from trainlog_debugger.tools.sources.pyspy import read as R
    monkeypatch.setattr(R, "MAX_DUMP_BYTES", 200)
    for r in range(4):
        (tmp_path / f"rank_{r}.pyspy.txt").write_text(pyspy(4000 + r, LOADING if r == 1 else WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert any("only the first" in n for n in d.notes), d.notes


# ---- py-spy --json, probing tables, pid ↔ rank (issue 13, item 1, second part) ---------------------------------

def pyspy_json(pid: int, frames) -> str:
    """`py-spy dump --json --pid P` as py-spy 0.4.3 prints it (pretty-printed; a helper thread listed first)."""
    import json

    def frame(f, w, entry):
        path, ln = w.rsplit(":", 1)
        return {"name": f, "filename": f"/usr/lib/python3/dist-packages/{path}" if not path.startswith("/") else path,
                "module": None, "short_filename": path, "line": int(ln), "locals": None, "is_entry": entry,
                "is_shim_entry": False}
    threads = [{"pid": pid, "thread_id": 140196092683968, "thread_name": "pt_autograd_0", "os_thread_id": pid + 7,
                "active": False, "owns_gil": False, "frames": [frame("wait", "threading.py:320", True)],
                "process_info": None},
               {"pid": pid, "thread_id": 140196095561792, "thread_name": "MainThread", "os_thread_id": pid,
                "active": False, "owns_gil": False,
                "frames": [frame(f, w, i == len(frames) - 1) for i, (f, w) in enumerate(frames)], "process_info": None}]
    return json.dumps(threads, indent=2) + "\n"


def probing_table(frames) -> str:
    """`probing <pid> query "SELECT func, file, lineno, depth, frame_type FROM python.backtrace"`: a bordered table
    (its query engine's pretty format), depth 0 innermost, a native frame among the Python ones."""
    rows = [("func", "file", "lineno", "depth", "frame_type")]
    rows.append(("pthread_cond_wait", "libc.so.6", "0", "0", "Native"))
    rows += [(f, w.rsplit(":", 1)[0], w.rsplit(":", 1)[1], str(i + 1), "Python") for i, (f, w) in enumerate(frames)]
    widths = [max(len(r[c]) for r in rows) for c in range(5)]
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    fmt = [("| " + " | ".join(v.ljust(widths[c]) for c, v in enumerate(r)) + " |") for r in rows]
    return "\n".join([border, fmt[0], border, *fmt[1:], border]) + "\n"


@pytest.mark.parametrize("world,odd", [(8, 3), (1024, 900)])
def test_pyspy_json_dumps_name_the_rank(tmp_path, world, odd):
    for r in range(world):
        (tmp_path / f"rank_{r}.pyspy.json").write_text(pyspy_json(5000 + r, LOADING if r == odd else WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks, d.status.value) == ("data_loading_stall", [odd], "hung"), d.headline
    ev = d.chain[0].evidence[0]
    assert ev.file == f"rank_{odd}.pyspy.json" and '"name": "_try_get_data"' in ev.text, ev
    assert d.verified


def test_a_json_dump_cites_each_frame_at_its_name_line():
    from trainlog_debugger.tools.sources.pyspy.report import parse_pyspy_json
    text = pyspy_json(77, LOADING)
    (st,) = parse_pyspy_json("p.json", text)
    lines = text.splitlines()
    assert [f for f, _, _ in st.frames] == [f for f, _ in LOADING] and st.pid == "77"
    assert all(lines[ev.line - 1].strip() == f'"name": "{f}",' for f, _, ev in st.frames)
    assert parse_pyspy_json("bad.json", '[{"pid": 1, "frames": [') == []  # truncated: no stacks, no traceback


def test_probing_tables_are_read_innermost_first(tmp_path):
    for r in range(8):
        (tmp_path / f"rank{r}.probing.txt").write_text(probing_table(SAVING if r == 6 else WAITING))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks) == ("storage_io", [6]), d.headline
    assert "| write " in d.chain[0].evidence[0].text


def nccl_init(host: str, pid: int, rank: int, world: int) -> str:
    return (f"{host}:{pid}:{pid + 90} [{rank % 8}] NCCL INFO ncclCommInitRank comm 0x55d0c8a0 rank {rank} nranks "
            f"{world} cudaDev {rank % 8} nvmlDev {rank % 8} busId 61000 commId 0x8c3f2a1b - Init COMPLETE")


def test_dumps_named_by_pid_get_their_rank_from_nccl_init_lines(tmp_path):
    """Dumps saved as `<pid>.txt` on each node (the usual `py-spy dump --pid $p > $p.txt` loop): the rank comes from
    the NCCL init lines in the job's log, matched on host AND pid (two nodes reuse pid 4001 here)."""
    world, odd = 16, 11
    log = []
    for r in range(world):
        host, pid = f"gpu-node-{r // 8}", 4000 + r % 8
        log.append(nccl_init(host, pid, r, world))
        (tmp_path / host).mkdir(exist_ok=True)
        text = pyspy(pid, LOADING if r == odd else WAITING)
        (tmp_path / host / f"{pid}.pyspy.txt").write_text(text)
    (tmp_path / "train.log").write_text("\n".join(log) + "\n")
    with open_bundle(tmp_path) as b:
        inv = run(b)
    d = inv.diagnosis
    assert (d.category, d.culprit_ranks) == ("data_loading_stall", [odd]), d.headline
    assert d.culprit_nodes == ["gpu-node-1"]


def test_a_pid_on_two_hosts_is_not_guessed():
    from trainlog_debugger.tools.sources.pyspy.report import attach_ranks
    st = parse("4001.txt", pyspy(4001, LOADING))
    assert attach_ranks(st, {"4001": [(1, "gpu-node-0"), (9, "gpu-node-1")]}) == 0 and st[0].rank is None


def test_a_collect_manifest_gives_host_and_rank(tmp_path):
    import json
    for h in range(2):
        host = f"gpu-node-{h}"
        d = tmp_path / host / "stacks"
        d.mkdir(parents=True)
        procs = []
        for lr in range(4):
            rank, pid = h * 4 + lr, 7000 + lr
            (d / f"pid-{pid}.pyspy.txt").write_text(pyspy(pid, LOADING if rank == 5 else WAITING))
            procs.append({"pid": pid, "rank": rank, "local_rank": lr, "world_size": 8})
        (tmp_path / host / "collect.json").write_text(json.dumps({"host": host, "processes": procs}))
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks, d.culprit_nodes) == ("data_loading_stall", [5], ["gpu-node-1"]), d.headline


def test_torchrun_failure_entries_map_pids_to_ranks(tmp_path):
    """After the watchdog fired, torchrun's report lists each failed worker: `host`, `rank : R (local_rank: L)`,
    `exitcode : -6 (pid: P)`; dumps taken before it was torn down, saved by pid, get those ranks."""
    entries = []
    for r in range(4):
        entries += [f"[{r}]:", "  time      : 2025-11-05_12:34:40", "  host      : gpu-node-3",
                    f"  rank      : {r} (local_rank: {r})", f"  exitcode  : -6 (pid: {6100 + r})",
                    "  error_file: <N/A>", "  traceback : Signal 6 (SIGABRT) received by PID %d" % (6100 + r)]
    (tmp_path / "launcher.log").write_text(
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n" + "=" * 60 + "\ntrain.py FAILED\n"
        + "-" * 60 + "\nFailures:\n" + "\n".join(entries) + "\n" + "=" * 60 + "\n")
    for r in range(4):
        (tmp_path / f"dump-{6100 + r}.txt").write_text(pyspy(6100 + r, LOADING if r == 2 else WAITING))
    with open_bundle(tmp_path) as b:
        inv = run(b)
    from trainlog_debugger.tools.rules import RuleInputs
    from trainlog_debugger.tools.sources.pyspy.report import launcher_pids
    pids = launcher_pids(RuleInputs(inv))
    assert pids["6102"] == [(2, "gpu-node-3")]
    assert 2 in inv.diagnosis.culprit_ranks or any(2 in f.ranks for f in inv.diagnosis.chain), inv.diagnosis.headline


# gdb `thread apply all bt` (pstack prints the same): other threads first, thread 1 (LWP = pid) last
_LIB = "/usr/local/lib/python3.10/dist-packages/torch/lib"
GDB_WAITING = [("__futex_abstimed_wait_common64", "(private=0, cancel=true) at ./nptl/futex-internal.c:57"),
               ("cudaStreamSynchronize", f"() from {_LIB}/../../nvidia/cuda_runtime/lib/libcudart.so.12"),
               ("c10d::ProcessGroupNCCL::WorkNCCL::synchronizeStream", f"() () from {_LIB}/libtorch_cuda.so"),
               ("c10d::ProcessGroupNCCL::WorkNCCL::wait", f"(std::chrono::duration<long, std::ratio<1l, 1000l> >) () "
                                                          f"from {_LIB}/libtorch_cuda.so")]
GDB_SAVING = [("__GI___libc_write", "(fd=57, buf=0x7f0a40000000, nbytes=1073741824) at ../sysdeps/unix/sysv/linux/write.c:26"),
              ("caffe2::serialize::PyTorchStreamWriter::writeRecord", f"(std::string const&, void const*, unsigned "
                                                                      f"long, bool) () from {_LIB}/libtorch_cpu.so"),
              ("_PyEval_EvalFrameDefault", "(tstate=<optimized out>) at ../Python/ceval.c:4769")]


def gdb(pid: int, frames, header: str = '$ gdb -p {pid} -batch -ex "thread apply all bt"') -> str:
    return "\n".join([header.format(pid=pid), "[Thread debugging using libthread_db enabled]",
                      "", f'Thread 2 (Thread 0x7f1b9effd640 (LWP {pid + 52}) "pt_nccl_watchdg"):',
                      "#0  0x00007f1c2a9e7f1b in __pthread_cond_timedwait (cond=0x55e0c2b11e20) at ./nptl/pthread_cond_wait.c:656",
                      f"#1  0x00007f1c26b1a7c5 in c10d::ProcessGroupNCCL::watchdogHandler() () from {_LIB}/libtorch_cuda.so",
                      "", f'Thread 1 (Thread 0x7f1c2a955740 (LWP {pid}) "python3"):']
                     + [f"#{i}  0x00007f1c2aa6{i:04x} in {f} {rest}" for i, (f, rest) in enumerate(frames)]
                     + [f"[Inferior 1 (process {pid}) detached]", ""])


@pytest.mark.parametrize("header", ['$ gdb -p {pid} -batch -ex "thread apply all bt"', "$ pstack {pid}",
                                    "Attaching to process {pid}"])
def test_gdb_native_stacks_are_read_like_py_spy_s(tmp_path, header):
    """gdb/pstack dumps of a hung job (several processes in one file, each attach its own record, the main thread
    being thread 1 whose LWP is the pid) are grouped like py-spy's: the process in torch.save's native writer while
    the others sit in WorkNCCL's wait never reached the collective (storage_io), and its rank comes from its pid."""
    world, odd = 8, 5
    text = "".join(gdb(5120 + r, GDB_SAVING if r == odd else GDB_WAITING, header) for r in range(world))
    stacks = parse("hang_stacks.txt", text)
    assert [s.pid for s in stacks] == [str(5120 + r) for r in range(world)]
    assert [s.in_collective() for s in stacks] == [r != odd for r in range(world)]
    assert stacks[odd].signature()[:2] == ("__GI___libc_write", "caffe2::serialize::PyTorchStreamWriter::writeRecord")
    (tmp_path / "hang_stacks.txt").write_text(text)
    (tmp_path / "train.log").write_text("\n".join(nccl_init("gpu-node1", 5120 + r, r, world) for r in range(world)) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks) == ("storage_io", [odd]), d.headline
    assert "writeRecord" in " ".join(e.text for e in d.chain[0].evidence)


def test_gdb_py_bt_lldb_and_a_core_s_bt_are_stacks():
    """gdb's py-bt (`File "f", line N, in fn`, most recent call first), lldb's threads and frames, and a core's
    bare `bt` (frames, no thread header) each give the process's main-thread frames, innermost first."""
    pybt = ('$ gdb -p 17121 -batch -ex "py-bt"\nTraceback (most recent call first):\n'
            '  File "/usr/lib/python3.10/multiprocessing/connection.py", line 931, in wait\n'
            '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data\n')
    lldb = ("* thread #1, name = 'python', stop reason = signal SIGSTOP\n"
            "  * frame #0: 0x00007f3c5a8d3c3b libc.so.6`__poll + 11\n"
            "    frame #1: 0x00007f3b21d4e5c2 libnccl.so.2`ncclGroupEnd + 1234\n")
    core = ("#0  0x00007f3c5a8d3c3b in raise () from /lib/x86_64-linux-gnu/libc.so.6\n"
            "#1  0x00007f3b21d4e5c2 in fused_rope_fwd (q=0x7f0a40000000) at csrc/rope.cu:88\n")
    got = [(s.pid, s.signature()[:2], s.in_collective()) for t in (pybt, lldb, core) for s in parse("d.txt", t)]
    assert got == [("17121", ("wait", "_try_get_data"), False), (None, ("__poll", "ncclGroupEnd"), True),
                   (None, ("raise", "fused_rope_fwd"), False)]
    assert parse("d.txt", core)[0].frames[1][1] == "csrc/rope.cu:88"
