"""What a sentence names and what a line shows (agent/graph/entities.py), and how a cited line is read and which
ranks the facts single out (agent/graph/claims.py), on lines as the ecosystem prints them."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlog_debugger.agent.graph.claims import Facts, sentences
from trainlog_debugger.agent.graph.entities import Haystack, entities
from trainlog_debugger.agent.graph.toolbox import Toolbox
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.bundle.reread import read_lines
from trainlog_debugger.tools.pipeline import run

CASES = Path(__file__).resolve().parents[2] / "cases"


@pytest.mark.parametrize("text, named", [
    ("Xid 79 on gpu-node-99, drain it.", {("xid", "79"), ("node", "gpu-node-99")}),
    ("rank 3 got SIGKILL", {("rank", "3"), ("signal", "SIGKILL")}),
    ("ranks 0-7 and 9 timed out after 600000 ms", {("rank", "0"), ("rank", "7"), ("rank", "9"), ("number", "600000")}),
    ("rank 3 and 600 seconds later", {("rank", "3"), ("number", "600")}),  # one rank; the rest is a number
    ("Exited with exit code 137 on host dgk713", {("exit", "137"), ("node", "dgk713")}),
    ("OSError: [Errno 28] No space left on device", {("errno", "ENOSPC")}),
    ("the loader died with ECONNRESET", {("errno", "ECONNRESET")}),
    ("see rank_3.log:812 and /workspace/megatron/training/training.py", {("file", "rank_3.log:812"),
                                                                          ("file", "training.py")}),
    ("1,024 ranks on A100-SXM4-80GB GPUs with NCCL 2.18.3 in bf16", {("number", "1024"), ("number", "2.18.3")}),
    ("local rank 3 on 10.0.0.5", {("number", "3"), ("node", "10.0.0.5")}),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", {("xid", "79"), ("number", "1234")}),
    ("exitcode  : -9 (pid: 20005)", {("exit", "-9"), ("number", "20005")}),
    ("LOCAL_RANK=3, node rank 1", {("number", "3"), ("number", "1")}),  # not the job's ranks
    ("Qwen2-7B on A100-SXM4-80GB with ConnectX-7, ZeRO-3", set()),       # models and parts, not machines
])
def test_what_a_sentence_names(text, named):
    assert {(e.kind, e.value) for e in entities(text)} == named


@pytest.mark.parametrize("line, said, holds", [
    ("torchrun: exitcode  : -9 (pid: 20005)", "SIGKILL", True),  # torchrun's -9 is signal 9
    ("Signal 9 (SIGKILL) received by PID 20005", "signal 9", True),
    ("Received Signals.SIGTERM death signal", "SIGKILL", False),
    ("OSError: No space left on device: '/ckpt/iter_100'", "ENOSPC", True),
    ("WorkNCCL(SeqNum=812, Timeout(ms)=600000)", "600000 ms", True),
    ("WorkNCCL(SeqNum=812, Timeout(ms)=6000001)", "600000 ms", False),  # a number, not a run of digits
    ("world size 1024", "1,024 ranks", True),
    ("NCCL INFO comm 0x55 rank 12 nranks 16 on gpu-node-99.cluster", "gpu-node-99", True),
    ("NCCL INFO comm 0x55 rank 12 nranks 16 on gpu-node-99", "gpu-node-9", False),
    ("[default1]:[rank1]: RuntimeError: CUDA error", "rank 11", False),
])
def test_what_a_line_shows(line, said, holds):
    h = Haystack.of([line])
    assert all(h.holds(e) for e in entities(said)) is holds


def test_sentences_are_cut_at_their_ends_not_inside_files_or_versions():
    text = "Rank 1 crashed at rank_3.log:812 with NCCL 2.18.3. It was an ECC error!\nXid 48 followed"
    assert sentences(text) == ["Rank 1 crashed at rank_3.log:812 with NCCL 2.18.3.", "It was an ECC error!",
                               "Xid 48 followed"]


@pytest.fixture(scope="module")
def crash():
    with open_bundle(CASES / "gen-8r-010") as b:
        box = Toolbox(b, run(b))
        yield Facts.of(box.inv.diagnosis, box), box


def test_a_cited_line_is_read_as_the_deterministic_side_reads_it(crash):
    facts, box = crash
    f = "error-4891784-0.out"
    text = read_lines(box.sources[f], {2, 14, 21})
    assert facts.reading(f, 14, text[14])[:2] == ("trigger", "gpu_cuda")     # rank 1's crash: the chain's trigger
    assert facts.reading(f, 21, text[21]).role == "cascade"                  # rank 3's watchdog timeout
    assert facts.reading(f, 2, text[2]).role != "trigger"                    # an NCCL INFO init line
    # a line the chain does not cite is read by the message tables: the uncorrectable ECC line is a gpu_cuda trigger
    ecc = "RuntimeError: transform: failed to synchronize: cudaErrorECCUncorrectable: uncorrectable ECC error encountered"
    assert facts.reading("other.log", 1, ecc)[:2] == ("trigger", "gpu_cuda")
    # a traceback header says nothing of the fault: citing one is no trigger
    assert facts.reading("other.log", 1, "[default5]:[rank5]: Traceback (most recent call last):").role != "trigger"


def test_the_facts_single_out_the_crashed_rank_only(crash):
    facts, box = crash
    assert facts.singled_out == {1}
    assert facts.place("error-4891784-0.out", "[default3]:[rank3]: x") == (3, ["gpu-node-17"])
    # the reports' entities count as facts: the stuck collective's sequence number, a node of the job
    held = facts.haystack
    assert all(held.holds(e) for e in entities("SeqNum 812 on gpu-node-18"))
    assert not any(held.holds(e) for e in entities("Xid 79 on gpu-node-99"))
