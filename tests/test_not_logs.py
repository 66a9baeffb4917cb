"""Input that is not a training job's logs gets one clear line and exit 2, never a verdict; logs that no catalog
pattern knows yet (a JAX/XLA job, a new NCCL wording) are still read; program source is never read as logs.
(Issue 10: "never a false all-clear", and no verdict made up from a source tree or /etc.)"""

from __future__ import annotations

from typer.testing import CliRunner

from trainlog_debugger.agent.cli.app import app
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate

runner = CliRunner()

TRAIN_PY = '''import torch.distributed as dist

def main():
    if not dist.is_initialized():
        raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error")
    print("[rank0]:[E1105 12:34:10.579409818 ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout")
'''
ETC = {
    "hosts": "127.0.0.1 localhost\n10.0.0.12 gpu-node-12\n",
    "ld.so.conf.d/cuda.conf": "/usr/local/cuda-12.4/targets/x86_64-linux/lib\n",
    "postgresql.conf": "checkpoint_timeout = 5min\t\t# range 30s-1d\nlog_min_messages = warning\n",
}


def _write(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_a_source_tree_and_etc_get_one_line_and_exit_2(tmp_path):
    root = _write(tmp_path / "b", {"src/train.py": TRAIN_PY, "src/model.cu": "__global__ void k() {}\n",
                                   **{f"etc/{k}": v for k, v in ETC.items()}})
    r = runner.invoke(app, ["ask", str(root)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "no training-job logs recognised" in lines[0] and "Traceback" not in r.output


def test_program_source_is_skipped_not_scanned(tmp_path):
    root = _write(tmp_path / "b", {"train.py": TRAIN_PY, "rank_0.log": "[rank0]: iteration 10 | loss 2.3\n"})
    with open_bundle(root) as b:
        assert [s.rel for s in b.sources] == ["rank_0.log"]
        assert [(s.rel, s.reason) for s in b.skipped][0][0] == "train.py"


def test_a_log_no_pattern_knows_is_still_a_log_and_never_an_all_clear(tmp_path):
    """A JAX job's allocator failure: no catalog line, no rank label, but a training-stack failure line."""
    root = _write(tmp_path / "b", {"combined.log": "cuMemAllocAsync failed to allocate 126,257,359,472 bytes\n"
                                                   "Free memory/Total:      18,801,229,824 / 197,890,015,232\n"})
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.status != Status.completed and d.missing


def test_every_analysis_command_refuses_input_that_holds_no_training_logs(tmp_path):
    """Issue 29: scan, nccl, steps, diff and grep printed an empty report and exited 0 on /etc where ask exited 2."""
    root = _write(tmp_path / "b", {f"etc/{k}": v for k, v in ETC.items()})
    for cmd in (["scan"], ["nccl"], ["steps"], ["diff"], ["grep", "timeout"], ["scan", "--json"], ["ask"]):
        r = runner.invoke(app, [*cmd, str(root)])
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 2, (cmd, r.output)
        assert len(lines) == 1 and "no training-job logs recognised" in lines[0], (cmd, r.stderr)
        assert r.stdout == "", cmd


def test_a_log_no_producer_names_is_still_read_by_every_command(tmp_path):
    root = _write(tmp_path / "b", {"out.txt": "epoch 3 step 100 loss 2.31\n"})
    for cmd in (["scan"], ["nccl"], ["steps"], ["diff"]):
        r = runner.invoke(app, [*cmd, str(root)])
        assert r.exit_code == 0, (cmd, r.output)


def test_a_trace_of_gpu_driver_calls_failing_is_read(tmp_path):
    """A sandbox's (or strace's) trace of a GPU job names no trainer, but a driver device and an errno on one line
    are a failure of the training stack: read, never refused (issue 25)."""
    root = _write(tmp_path / "b", {"runsc.log": (
        "I0412 15:55:45.690863  1008391 strace.go:605] [  15:  42] python X ioctl(0x44 /dev/nvidiactl, 0xc08046d4, "
        "0x7f5c573fcb90) = 0 (0x0) errno=22 (invalid argument) (21.739µs)\n")})
    r = runner.invoke(app, ["ask", "--offline", str(root)])
    assert r.exit_code == 0 and "no training-job logs" not in r.output, r.output


def test_a_training_loop_s_progress_bar_is_read(tmp_path):
    """HF Trainer's tqdm bar over the training steps, with nothing else: a training log, read (issue 25); a
    download's bar (bytes a second, not iterations) is not one."""
    root = _write(tmp_path / "b", {"out.log": "".join(
        f"  0%|          | {i}/11084 [00:{i:02d}<5:18:57,  1.73s/it]\n" for i in range(1, 8))})
    r = runner.invoke(app, ["ask", "--offline", str(root)])
    assert r.exit_code == 0 and "no training-job logs" not in r.output, r.output
    dl = _write(tmp_path / "dl", {"out.log": "Downloading: 100%|#####| 1.2G/1.2G [00:10<00:00, 120MB/s]\n"})
    assert runner.invoke(app, ["ask", "--offline", str(dl)]).exit_code == 2


def test_a_line_that_counts_a_job_s_gpus_is_read(tmp_path):
    """GPUs counted or asked for are a job's words (issue 25: a file that speaks of GPUs is read, however short);
    a driver's library path or a node's GPU model in a hosts-style list is not."""
    for i, line in enumerate(["Using 8 GPUs", " 0.0/1.0 GPU", "num_gpus=4 requested but only 2 available",
                              "CUDA_VISIBLE_DEVICES=0,1"]):
        root = _write(tmp_path / f"g{i}", {"out.log": line + "\n"})
        r = runner.invoke(app, ["ask", "--offline", str(root)])
        assert r.exit_code == 0 and "no training-job logs" not in r.output, (line, r.output)
    for i, text in enumerate(["/usr/local/cuda-12.4/targets/x86_64-linux/lib\n", "gpu-node-12 a100x8\n"]):
        root = _write(tmp_path / f"n{i}", {"nodes.conf": text})
        assert runner.invoke(app, ["ask", "--offline", str(root)]).exit_code == 2, text
    # in a folder (not a one-file paste, which any word of GPUs gets read), a model number counts no GPUs
    docs = _write(tmp_path / "hw", {"boards.txt": "Supported boards: RTX 3090 GPU, A100 GPU\n",
                                    "vendors.txt": "nvidia amd intel\n"})
    assert runner.invoke(app, ["ask", "--offline", str(docs)]).exit_code == 2


def test_a_one_file_paste_that_speaks_of_training_is_read(tmp_path):
    """Issue 25: a file that speaks of torch, CUDA, NCCL, GPUs, ranks, steps, loss or batches is read, however
    little it says, and answered as far as it goes (never `completed`); a one-file config that names CUDA only in a
    path, or a hosts file whose host names hold `gpu`, is still refused."""
    for i, line in enumerate(["Total steps: 1000", "processed 120 batches", "torch.cuda.is_available() returns False",
                              "nvidia-smi shows 0% utilization on all GPUs",
                              "the loss jumped after the second epoch and never came back",  # two loop words
                              # another stack's start-up, no failure word (absl's glog INFO lines of a multi-host JAX
                              # job that hung after them; a ROCm job's RCCL banner)
                              "I1105 10:00:01.000000  1234 distributed.py:90] Connecting to JAX distributed service "
                              "on 10.0.0.1:1234",
                              "RCCL version 2.18.3+hip6.0 HEAD:2d4d2d5"]):
        root = _write(tmp_path / f"t{i}", {"paste.txt": line + "\n"})
        with open_bundle(root) as b:
            d = investigate(b)
        assert d.status == Status.inconclusive, (line, d.headline)
    # a path, a host name, a pip pin, and English words that are also a loop's (`to step to`, a licence's `LOSS OF
    # USE`) speak of no job
    for i, (name, text) in enumerate([("cuda.conf", "/usr/local/cuda-12.4/targets/x86_64-linux/lib\n"),
                                      ("hosts", ETC["hosts"]),
                                      ("constraints.txt", "torch<=2.4.1\ntorchvision<=0.19.1\n"),
                                      ("requirements.txt", "jax==0.4.30\nkeras>=3.0\n"),
                                      ("inputrc", "# allow the use of the Home/End keys to step to the next word\n"),
                                      ("COPYING", "IN NO EVENT SHALL THE AUTHORS BE LIABLE FOR ANY DAMAGES (INCLUDING "
                                                  "LOSS OF USE, DATA, OR PROFITS)\n")]):
        root = _write(tmp_path / f"c{i}", {name: text})
        assert runner.invoke(app, ["ask", "--offline", str(root)]).exit_code == 2, name


def _job(root, host: str, day: str, rank: int = 0):
    return _write(root, {f"{host}.log": (
        f"{host}:20000:20000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.{rank + 2}<0>\n"
        f"[rank{rank}]:[E{day} 12:34:10.579409818 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        f"600011 milliseconds before timing out.\n"
        f"srun: error: {host}: task {rank}: Exited with exit code 1\n")})


def test_two_unrelated_bundles_are_refused_not_merged(tmp_path):
    """Issue 29: two jobs given together (no host in common, weeks apart) were merged into one job whose time range
    ran backwards."""
    a, b = _job(tmp_path / "a", "gpu-node-3", "1105"), _job(tmp_path / "b", "dgx-17", "0301", 1)
    for cmd in (["ask"], ["scan"]):
        r = runner.invoke(app, [*cmd, str(a), str(b)])
        assert r.exit_code == 2, (cmd, r.output)
        assert "look like two jobs (no host in common" in r.stderr, r.stderr


def test_one_job_split_by_node_is_one_job(tmp_path):
    a, b = _job(tmp_path / "a", "gpu-node-3", "1105"), _job(tmp_path / "b", "gpu-node-4", "1105", 1)
    r = runner.invoke(app, ["ask", str(a), str(b)])
    assert r.exit_code == 0, r.output


def test_documentation_is_not_read_as_logs(tmp_path):
    """Issue 30: /usr/share/doc got a confident verdict from an HTML page that explains EADDRINUSE and an API
    reference (JSON with HTML in its strings). Pages, manuals and changelogs quote every error they document."""
    root = _write(tmp_path / "doc", {
        "nodejs/api/errors.html": "<p><code>EADDRINUSE</code> (Address already in use): an attempt to bind a server "
                                  "failed.</p>\n" * 5,
        "nodejs/api/all.json": '{"desc": "' + "<p>The <code>EADDRINUSE</code> error: <a href=#x>address already in "
                                              "use</a></p>" * 30 + '"}\n',
        "pkg/changelog.Debian": "pkg (1.2) unstable; urgency=low\n  * fix: RuntimeError: CUDA error: out of memory\n",
        "pkg/README.md": "If you see `NCCL error: unhandled system error`, set NCCL_DEBUG=INFO.\n",
        "man/man7/nccl.7": '.TH NCCL 7\n.SH ERRORS\nNCCL error: unhandled system error (run with NCCL_DEBUG=INFO)\n',
        "train/rank_0.log": "[rank0]: iteration 10 | loss 2.31\n"})
    with open_bundle(root) as b:
        assert [s.rel for s in b.sources] == ["train/rank_0.log"]
        reasons = {s.rel: s.reason for s in b.skipped}
    assert all(r.startswith("documentation, not a log") for r in reasons.values()) and len(reasons) == 5, reasons


def test_a_question_in_markdown_with_its_log_pasted_in_is_read_when_it_is_the_only_file(tmp_path):
    """A user's issue text saved as `question.md`, the NCCL output pasted between its paragraphs: the only file
    given is read (and said so); beside a log, or as one of a folder of documents, a .md is still documentation."""
    question = ("EKS, two p5.48xlarge nodes, the same image works elsewhere. NCCL_DEBUG=INFO output of rank 0:\n\n"
                "mistral-pt-worker-0:88:88 [0] NCCL INFO NET/Plugin: Loaded net plugin AWS Libfabric (v8)\n"
                "mistral-pt-worker-0:88:88 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.11.0-aws\n"
                "mistral-pt-worker-0:88:88 [0] init.cc:118 NCCL WARN Error: network AWS Libfabric not found.\n\n"
                "What am I missing?\n")
    root = _write(tmp_path / "q", {"question.md": question})
    with open_bundle(root) as b:
        assert [s.rel for s in b.sources] == ["question.md"] and not b.skipped
        assert any("only file given" in n for n in b.notes)
        d = investigate(b)
    assert d.category == "config", d.headline
    root = _write(tmp_path / "two", {"question.md": question, "rank_0.log": "[rank0]: iteration 10 | loss 2.31\n"})
    with open_bundle(root) as b:
        assert [s.rel for s in b.sources] == ["rank_0.log"]
    # a lone document that speaks of no training job is still refused by the gate
    root = _write(tmp_path / "doc", {"question.md": "# Build\nRun `make` and then `make install`.\n"})
    assert runner.invoke(app, ["ask", "--offline", str(root)]).exit_code == 2
    # a source tree's README, or any document beside program source, quotes the errors it explains: documentation
    oom = "If you see `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB`, lower the batch.\n"
    for i, files in enumerate([{"README.md": oom}, {"NOTES.md": oom, "pkg/train.py": "import torch\n"}]):
        root = _write(tmp_path / f"tree{i}", files)
        assert runner.invoke(app, ["ask", "--offline", str(root)]).exit_code == 2, files


def test_a_rotated_log_is_read_though_its_number_is_a_man_section(tmp_path):
    """logrotate and Python's RotatingFileHandler name a log's older parts `train.log.1`, `syslog.3.gz`: the
    manual pages' section suffixes, but no roff inside; the rotated part may hold the failure."""
    import gzip
    root = tmp_path / "b"
    root.mkdir()
    (root / "train.log").write_text("[rank1]: iteration 1210 | loss 2.02\n")
    with gzip.open(root / "train.log.1.gz", "wt") as fh:
        fh.write("[2025-02-02 22:50:11,402] [INFO] [trainer] step 2000 loss=2.150 lr=1.0e-04\n"
                 "[2025-02-02 22:51:02,118] [ERROR] [trainer] rank 0: saving checkpoint failed: OSError: [Errno 28] "
                 "No space left on device: '/ckpt/step_2000/rank0.pt'\n")
    with open_bundle(root) as b:
        assert sorted(s.rel for s in b.sources) == ["train.log", "train.log.1.gz"], [s.reason for s in b.skipped]
        d = investigate(b)
    assert d.category == "storage_io" and d.culprit_ranks == [0], d.headline


def test_generic_error_lines_alone_are_no_confident_verdict(tmp_path):
    """Issue 30 (/usr/share/doc got a confident verdict): an errno line in a file that names no rank, no launcher,
    no scheduler and no training library can be read, but not with confidence, and the answer says why."""
    root = _write(tmp_path / "b", {"backup.log": "backup started\nwrite /var/backups/db.tar failed: No space left on "
                                                 "device\nbackup aborted\n"})
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.category == "storage_io" and d.confidence == "low"
    assert any(n.startswith("confidence capped: nothing in the bundle names a training job") for n in d.notes)


def test_a_training_log_with_the_same_line_keeps_its_confidence(tmp_path):
    root = _write(tmp_path / "b", {"rank_0.log": "[rank0]: iteration 10 | loss 2.31\n[rank0]: OSError: [Errno 28] "
                                                 "No space left on device\n"})
    with open_bundle(root) as b:
        d = investigate(b)
    assert d.category == "storage_io" and not any("names a training job" in n for n in d.notes)


_TB = ("Traceback (most recent call last):\n"
       '  File "{a}", line 250, in <module>\n    main()\n'
       '  File "{b}", line 218, in save\n    _save(obj, f)\n'
       "OSError: [Errno 28] No space left on device\n")


def test_a_python_traceback_alone_is_generic_unless_its_frames_are_a_training_stack(tmp_path):
    """Issue 30: /usr/share/doc kept a confident verdict because a Python test suite's traceback counted as a
    training job's. A traceback is any program's; one whose frames run through a training library or script is a
    training job's (a bare paste of `torch.save` failing with ENOSPC keeps its confidence)."""
    doc = _write(tmp_path / "doc", {"tests/output.txt": _TB.format(a="/usr/lib/python3.12/test/regrtest.py",
                                                                  b="/usr/lib/python3.12/shutil.py")})
    with open_bundle(doc) as b:
        d = investigate(b)
    assert d.category == "storage_io" and d.confidence == "low"
    assert any(n.startswith("confidence capped: nothing in the bundle names a training job") for n in d.notes)
    job = _write(tmp_path / "job", {"paste.log": _TB.format(
        a="train.py", b="/home/u/venv/lib/python3.7/site-packages/torch/serialization.py")})
    with open_bundle(job) as b:
        d = investigate(b)
    assert d.category == "storage_io" and d.confidence != "low"
    assert not any("names a training job" in n for n in d.notes)


def test_a_one_file_paste_that_reports_a_failure_is_read(tmp_path):
    """A user pastes the one message in front of them: it is answered as far as it goes, never refused. A fabric's
    words no table knows stay inconclusive; the older libfabric CXI wording of an event-queue overflow is the
    slingshot table's (config: the CQ size). A lone config file that reports nothing is still refused, and so is a
    folder of such files."""
    paste = _write(tmp_path / "p", {"paste.txt": "hsn1: fabric endpoint reported a fatal transport fault\n"})
    with open_bundle(paste) as b:
        d = investigate(b)
    assert d.status == Status.inconclusive and d.status != Status.completed
    known = _write(tmp_path / "k", {"paste.txt": "Cassini Event Queue overflow detected.\n"})
    with open_bundle(known) as b:
        d = investigate(b)
    assert (d.status, d.category) == (Status.crashed, "config")
    for files in ({"hosts": ETC["hosts"]}, {"postgresql.conf": ETC["postgresql.conf"]}):
        res = runner.invoke(app, ["ask", str(_write(tmp_path / next(iter(files)), files))])
        assert res.exit_code == 2 and "no training-job logs recognised" in res.output


def test_a_paste_that_reports_an_abnormal_end_or_says_it_in_chinese_is_read(tmp_path):
    """Issue 25 (never refuse a training log): the words a process's abnormal end is reported in (an exit code, a
    signal, `Segmentation fault`), a `UserWarning`, a Lua torch size mismatch, and the same failure words as a
    Chinese-speaking user's paste says them are a failure reported, read and answered as far as they go."""
    for i, text in enumerate(["Exited with exit code 137\n", "Segmentation fault\n", "received signal 9\n",
                              "/usr/local/share/lua/5.1/nn/Linear.lua:66: size mismatch at THTensorMath.c:706\n",
                              "UserWarning: the given NumPy array is not writable\n",
                              "显存不足，训练中断\n", "多机训练时报错：连接超时\n"]):
        root = _write(tmp_path / f"p{i}", {"paste.txt": text})
        r = runner.invoke(app, ["ask", "--offline", str(root)])
        assert r.exit_code == 0 and "no training-job logs" not in r.output, (text, r.output)
        assert "COMPLETED" not in r.output
    # words that only look like it: a setting, and a comment
    for i, text in enumerate(["exit_code = 1\n", "# retry on exit status 2 or a version mismatch\n"]):
        root = _write(tmp_path / f"n{i}", {"app.conf": text})
        assert runner.invoke(app, ["ask", "--offline", str(root)]).exit_code == 2, text


def test_a_long_log_whose_training_lines_come_after_a_long_preamble_is_read(tmp_path):
    """A console log that opens with 200 KiB of package installs and speaks of training only at its end (where a
    console stops when it fails or hangs): its head alone speaks of no training, its tail does. Read whole, alone or beside another
    file; a long file that says nothing of training at either end is still refused."""
    preamble = "".join(f"Collecting package-{i}==1.0.{i}\n  Downloading package-{i}-1.0.{i}.tar.gz (42 kB)\n"
                       for i in range(3000))
    assert len(preamble) > 128 << 10
    tail = "Epoch 3: 41%|####      | 410/1000 [02:11<03:09,  3.11it/s, loss=2.31]\n"  # and no more: a hang
    for files in ({"console.txt": preamble + tail}, {"console.txt": preamble + tail, "env.txt": "HOME=/root\n"}):
        root = _write(tmp_path / f"f{len(files)}", files)
        r = runner.invoke(app, ["ask", "--offline", str(root)])
        assert r.exit_code == 0 and "no training-job logs" not in r.output, r.output
    quiet = _write(tmp_path / "q", {"install.txt": preamble + "Successfully installed package-1\n"})
    assert runner.invoke(app, ["ask", "--offline", str(quiet)]).exit_code == 2


def test_a_data_preparation_bar_is_a_training_job_s_line(tmp_path):
    """HF datasets' `Map`/tokenizer bar (examples a second) is the data preparation of a training loop, read in a
    folder like a training bar; a download's bytes-a-second bar is not."""
    bar = "Running tokenizer on dataset:  41%|####      | 41000/100000 [00:32<00:46, 1275.31 examples/s]\n"
    root = _write(tmp_path / "b", {"out.log": bar, "env.txt": "HOME=/root\n"})
    assert runner.invoke(app, ["ask", "--offline", str(root)]).exit_code == 0
    dl = _write(tmp_path / "dl", {"out.log": "model.safetensors:  41%|####  | 4.1G/10G [00:32<00:46, 127MB/s]\n",
                                  "env.txt": "HOME=/root\n"})
    assert runner.invoke(app, ["ask", "--offline", str(dl)]).exit_code == 2


_GDB_BT = (
    'Thread 1 (Thread 0x7f3c5a4e7740 (LWP 2345) "python"):\n'
    "#0  0x00007f3c5a8d3c3b in sched_yield () from /lib/x86_64-linux-gnu/libc.so.6\n"
    "#1  0x00007f3b21d4e5c2 in ncclCommInitRankFunc(ncclAsyncJob*) () from /usr/lib/x86_64-linux-gnu/libnccl.so.2\n"
    "#2  0x00007f3b5c2a1f33 in c10d::ProcessGroupNCCL::getNCCLComm(std::string const&, c10::Device&, c10d::OpType, "
    "int, bool) () from /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so\n")


def test_a_native_stack_of_a_hung_process_is_read_not_refused(tmp_path):
    """A gdb/pstack backtrace (every line opens with `#N`, no failure word: the process hangs) or lldb's frames,
    attached alone to a hang report, is a running job's stack: read and answered as far as it goes (inconclusive),
    never refused (issue 25); a file of numbered notes (`#1 ...`) is no stack."""
    lldb = ("* thread #1, name = 'python', stop reason = signal SIGSTOP\n"
            "  * frame #0: 0x00007f3c5a8d3c3b libc.so.6`sched_yield + 11\n"
            "    frame #1: 0x00007f3b21d4e5c2 libnccl.so.2`ncclCommInitRankFunc(ncclAsyncJob*) + 1234\n")
    for i, text in enumerate([_GDB_BT, lldb, "#3  train_step (batch=0x55d0c0a0) at csrc/train.cc:42\n"]):
        root = _write(tmp_path / f"s{i}", {"bt.txt": text})
        with open_bundle(root) as b:
            d = investigate(b)
        assert d.status == Status.inconclusive, (i, d.headline)
    notes = _write(tmp_path / "notes", {"todo.md": "#1 priority for the release\n#2 update the hosts\n",
                                        "hosts": "10.0.0.12 node-12\n"})
    assert runner.invoke(app, ["ask", "--offline", str(notes)]).exit_code == 2
