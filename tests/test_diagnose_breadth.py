"""General failures that a tool built on 23 incidents used to miss (issue 25), each as a real-shaped paste: the
answer comes from the ecosystem's own knowledge (the message tables, the lexicon), never "no fault found", never a
refusal."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate

CASES = [
    # Ray's memory monitor killing a worker for host memory
    ("ray memory monitor",
     "(raylet) [2024-05-01 10:00:00,123 E 1234 1234] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed "
     "due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 1f2e, IP: 10.0.0.5) over the "
     "last time period.\nray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n",
     "oom", None),
    # an InfiniBand completion error reported by NCCL's network plugin
    ("ib plugin completion",
     "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IBext : Got completion from peer "
     "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00::1 remoteGids fd00::2\n",
     "network", None),
    # NCCL refusing two ranks that share one GPU, as releases before 2.19 word it (nccl_legacy)
    ("duplicate gpu",
     "node1:1234:1300 [1] init.cc:900 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000\n"
     "node1:1234:1300 [1] NCCL INFO init.cc:901 -> 5\n", "config", None),
    # a CUDA error whose documented meaning is "the fabric manager is not running"
    ("cuda system not ready",
     "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 3, in <module>\n"
     "[rank0]: RuntimeError: CUDA error: system not yet initialized\n", "infrastructure", None),
    # a planned walltime exit that Megatron prints before the scheduler ends the job
    ("megatron walltime",
     " iteration     4200/  100000 | consumed samples:      4300800 | lm loss: 2.143E+00 |\n"
     "[exiting program after 1190.0123456 minutes] datetime: 2025-03-01 07:59:58\n", "infrastructure", Status.cancelled),
    # collective fingerprints under TORCH_DISTRIBUTED_DEBUG=DETAIL, no launcher banner, no timestamps
    ("fingerprint mismatch",
     "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
     "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[1024], TensorDtypes=Float, "
     "TensorDeviceTypes=TensorOptions(dtype=float, device=cuda)), but Rank 1 is running collective: "
     "CollectiveFingerPrint(SequenceNumber=12, OpType=BROADCAST, TensorShape=[4], TensorDtypes=Long, "
     "TensorDeviceTypes=TensorOptions(dtype=long, device=cuda)).\n", "software", None),
    # a bare distributed_c10d.py traceback, cut before its exception
    ("bare c10d frames",
     '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 2606, in all_gather\n'
     "    work = default_pg.allgather([tensor_list], [tensor])\n", "software", Status.inconclusive),
    # only the C++ frames of c10's backtrace: something raised (here the NCCL watchdog), what is cut off
    ("c10 frames only",
     "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1554e8b12f86 in /opt/torch/lib/libc10.so)\n"
     "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l,"
     " 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in /opt/torch/lib/libtorch_cuda.so)\n", "software", Status.inconclusive),
    # frames as torchrun prints them, each behind the rank's `[rankN]:` label, cut before the exception
    ("rank-labelled frames",
     "[rank8]:   File \"/opt/app/checkpointing.py\", line 2011, in _create_dirs\n"
     "[rank8]:     os.makedirs(directory, exist_ok=True)\n"
     "[rank8]:   File \"<frozen os>\", line 225, in makedirs\n", "software", Status.inconclusive),
    # frames behind a prefix no launcher writes (pytest's `E   ` around a Ray worker's traceback), cut before the
    # exception: a training stack's frames are a training log (never refused) and a cut-off stack (software)
    ("pytest-prefixed frames",
     "E                         File \"/envs/ntf/lib/python3.8/site-packages/pytorch_lightning/plugins/training_type/"
     "ddp_spawn.py\", line 215, in configure_ddp\n"
     "E                           self._model = self._setup_model(LightningDistributedModule(self.model))\n",
     "software", Status.inconclusive),
    # a user's own per-rank prints, with a NaN
    ("own prints",
     "rank 3: epoch 2 step 1200 loss 2.3104\nrank 3: epoch 2 step 1201 loss nan\n", "numerical", None),
    # a trainer's own stop, the whole paste: the loss named non-finite in words, no number beside it (read, never
    # refused; numerical)
    ("loss named NaN in words", "Loss is NaN, stopping training\n", "numerical", None),
    # a refused connection to the coordinator (gRPC's words under XLA's status): nothing listened there, which is
    # no filesystem's fault (TAXONOMY's start-up rule: config, network or infrastructure; read as network)
    ("refused connection under an absl status",
     "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: "
     "ipv4:10.0.0.5:1234: Failed to connect to remote host: Connection refused\n", "network", None),
    # Lightning's Trainer banner and model summary on a TPU host, then the paste stops: a training job, read
    # (lightning/pytorch/trainer/setup.py, utilities/model_summary/model_summary.py), never refused
    ("lightning banner",
     "GPU available: False, used: False\nTPU available: True, using: 8 TPU cores\n774 M     Trainable params\n"
     "0         Non-trainable params\n", None, Status.inconclusive),
    # the same from Lightning 0.7 (trainer.py:605, core/memory.py:142): its TPU line and its summary table's header
    ("lightning 0.7 banner",
     "INFO:lightning:GPU available: False, used: False\nINFO:lightning:training on 8 TPU cores\n"
     "   | Name  | Type            | Params\n", None, Status.inconclusive),
    # a CUDA graph capture that the program broke (cudaErrorStreamCaptureInvalidated): the earlier illegal call is
    # often swallowed (capture_end runs in __exit__), so this line is the first proof, and it is the program's
    ("cuda graph capture invalidated",
     "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"/usr/lib/python3.11/site-packages/torch/cuda/"
     "graphs.py\", line 186, in __exit__\n[rank0]:     self.cuda_graph.capture_end()\n"
     "[rank0]: RuntimeError: CUDA error: operation failed due to a previous error during capture\n", "software", None),
    # a trainer's own finiteness check through torch._assert_async (torchtitan): a device-side assert whose message
    # says the loss went non-finite is the run's divergence, not an index out of range
    ("device assert of a finiteness check",
     "[rank0]:/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:110: _assert_async_cuda_kernel: block: [0,0,0], "
     "thread: [0,0,0] Assertion `Loss or gradient norm is not finite on at least one rank at step 1822. Stopping "
     "training before the optimizer update.` failed.\n"
     "[rank0]: torch.AcceleratorError: CUDA error: device-side assert triggered\n", "numerical", None),
    # the usual device-side assert: a class index out of range (the program's)
    ("device assert of an index",
     "[rank0]:/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
     "thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
     "[rank0]: RuntimeError: CUDA error: device-side assert triggered\n", "software", None),
    # PBS's own memory-limit kill (openpbs mom_main.c job_over_limit) is the memory evidence a killed DataLoader
    # worker needs (TAXONOMY: a worker's SIGKILL is memory only beside a kill line that says so)
    ("pbs memory limit",
     "[rank1]: RuntimeError: DataLoader worker (pid 48211) is killed by signal: Killed. \n"
     "=>> PBS: job killed: mem 528482304kb exceeded limit 524288000kb\n", "oom", None),
    # Flux's time-limit exception (flux-core job-exec.c)
    ("flux time limit",
     "[rank0]: step 4200 loss 2.14\n"
     "14400.081s: job.exception f4WJLf5tH2zD type=timeout severity=0 resource allocation expired\n",
     "infrastructure", None),
    # a host memory limit hit while registering RDMA memory: the memlock limit, not the network
    ("ibv_reg_mr memlock",
     "node7:50561:50762 [1] misc/ibvwrap.cc:42 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n",
     "config", None),
]


@pytest.mark.parametrize("name, text, category, status", CASES, ids=[c[0] for c in CASES])
def test_a_general_failure_gets_an_answer(tmp_path, name, text, category, status):
    (tmp_path / "combined.log").write_text(text)
    with open_bundle(tmp_path) as b:
        d = investigate(b)  # never refused: a paste that speaks of training is read
    assert d.status != Status.completed
    if category is None:
        assert d.status == Status.inconclusive  # read, answered weakly, and it names what is missing
        assert d.missing
    else:
        assert d.category == category, d.headline
        assert d.chain and all(e.text for f in d.chain for e in f.evidence)
    if status is not None:
        assert d.status == status


def test_the_cap_on_reading_file_ends_is_said(tmp_path):
    """Where nothing failed visibly, file ends are read for a cut-off stack trace, in at most 64 files: said."""
    for r in range(70):
        (tmp_path / f"rank{r}.log").write_text(f"[rank{r}]: iteration 1 | lm loss 2.5\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "none" and any("the ends of 64 of 70 files" in n for n in d.notes)


def test_a_line_logged_at_error_severity_is_read_whatever_its_words(tmp_path):
    """XLA's rendezvous warning names no failure word, but its logger says ERROR (TSL's sink, `: E file.cc:N] `): it
    is kept and read (the jax table knows it: a stuck communicator setup's cascade), never "no fault found"."""
    line = ("2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been waiting for "
            "`initialize clique for rank 6; clique=devices=[0,1,2,3,4,5,6,7]; stream=0; run_id=724296073` for 10 "
            "seconds and may be stuck. Expected 8 threads to join the rendezvous, but not all of them arrived on time.")
    (tmp_path / "combined.log").write_text(line + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category != "none" and d.status == Status.inconclusive
    assert d.chain[0].evidence[0].text == line
