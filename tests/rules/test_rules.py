"""Each rule on its own: the lines that make it fire (and with which category), and near-misses that must not.

Lines are in the formats of ../shared/FORMATS.md; a comment says why each row must or must not fire.
"""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.rules import RULES

BY_NAME = {f"{r.__module__.rsplit('.', 1)[1]}.{r.__name__}": r for r in RULES}

_RERUN = "[ERROR    | megatron.core.rerun_state_machine]: Rank 12, node {}, device {}, iteration #5001: {}"
_RERUN_NAN = ("[ERROR    | megatron.core.rerun_state_machine]: Unexpected result nan on rank 12 at iteration #5001 "
              "invocation #1 (message='found NaN in local forward loss calculation')")
_FIRST_RERUN = ("First rerun: unexpected result is reproducible within the tolerance (nan = nan). Need to rerun on a "
                "different GPU to verify correctness.!")

FIRE = [
    # Xid 79 is hardware: drain the node
    ("gpu.xid", {"kern.log": ["Jan 22 18:38:35 node7 kernel: NVRM: Xid (PCI:0000:81:00): 79, pid='<unknown>', "
                              "name=<unknown>, GPU has fallen off the bus."]}, "gpu_cuda", 0.9),
    # Xid 13 is usually the program's own fault: weak
    ("gpu.xid", {"kern.log": ["[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 13, pid=1234, name=python, Graphics "
                              "SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address"]}, "gpu_cuda", 0.5),
    ("gpu.ecc", {"rank_2.log": ["[rank2]: RuntimeError: CUDA error: uncorrectable ECC error encountered"]}, "gpu_cuda", 0.9),
    ("gpu.cuda_error", {"rank_2.log": ["[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered"]},
     "gpu_cuda", 0.7),
    # the GPU's sticky fault surfaces in c10d's watchdog thread, which queries every work's CUDA event
    ("gpu.cuda_error", {"rank_3.log": ["[rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID "
                                       "0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
                                       "CUDA error: an illegal memory access was encountered"]}, "gpu_cuda", 0.7),
    ("gpu.nccl_cuda_failure", {"n.log": ["node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 "
                                         "'invalid argument'"]}, "infrastructure", 0.75),
    ("oom.cuda_oom", {"rank_1.log": ["[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                                     "GPU 1 has a total capacity of 79.10 GiB of which 1.23 GiB is free."]}, "oom", 0.95),
    # XLA/JAX's and the CUDA driver pool's own out-of-memory wordings
    ("oom.accelerator_alloc", {"combined.log": ["jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of "
                                                "memory while trying to allocate 17179869184 bytes."]}, "oom", 0.9),
    # one process waits on its DataLoader while another is inside a collective: it never reached the collective
    ("data.loader_stall_in_dumps", {"dump_node1.log": ['Thread 1439102 (idle): "MainThread"', "    get (queue.py:179)",
                                                       "    _try_get_data (torch/utils/data/dataloader.py:1011)"],
                                    "dump_node2.log": ['Thread 2201 (idle): "MainThread"',
                                                       "    broadcast (torch/distributed/distributed_c10d.py:1191)"]},
     "data_loading_stall", 0.7),
    # NCCL's topology code failing is the library (a bug or an unsupported topology), not the network
    ("network.nccl_subsystem", {"n.log": ["node3:3411:3602 [0] graph/topo.h:230 NCCL WARN Could not find NET with id 0"]},
     "software", 0.55),
    # a verbs call failing in the IB transport is the network
    ("network.nccl_subsystem", {"n.log": ["node2:1234:1299 [0] transport/net_ib.cc:100 NCCL WARN Call to ibv_create_qp "
                                          "failed with error Cannot allocate memory errno 12"]}, "network", 0.55),
    # an interface name that matches nothing is the launch configuration, not the fabric
    ("config.nccl_interface", {"n.log": ["node1:1234:1300 [0] bootstrap.cc:80 NCCL WARN Bootstrap : no socket "
                                         "interface found"]}, "config", 0.85),
    ("oom.host_oom", {"slurm-1.out": ["slurmstepd: error: Detected 1 oom_kill event in StepId=123456.batch. Some of "
                                      "the step tasks have been OOM Killed."]}, "oom", 0.85),
    # IB status 4 = local protection: a host (ACS/GDR) problem, infrastructure
    ("network.ib_completion", {"n.log": ["H100-1:9821:9920 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got "
                                         "completion from peer fe80::966d:ae03:8b:df50%ib0<44413> with error 4, opcode "
                                         "32613, len 32613, vendor err 81 (Send)"]}, "infrastructure", 0.8),
    # IB status 12 = retries exhausted: the network
    ("network.ib_completion", {"n.log": ["[2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] "
                                         "transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer "
                                         "10.99.91.63<51161> with status=12 opcode=32614 len=32614 vendor err 129 (Send) "
                                         "localGid ::ffff:10.99.92.59 remoteGids::ffff:10.99.91.63 hca mlx5_1"]},
     "network", 0.85),
    # the same line as a paste wrapped it (`len` / `0, vendor err 129 (Recv)` on the next line): the status still reads
    ("network.ib_completion", {"n.log": ["node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got "
                                         "completion from peer 10.2.0.5<33092> with error 12, opcode 0, len",
                                         "0, vendor err 129 (Recv)"]}, "network", 0.85),
    ("network.nccl_error", {"n.log": ["dgxa100:1050:1316 [0] NCCL INFO include/net.h:25 -> 2",
                                      "dgxa100:1050:1316 [0] NCCL INFO transport/net.cc:515 -> 2"]}, "network", 0.55),
    # NCCL's own reason, printed by c10d after `Last error:`, read through NCCL's table
    ("meaning.nccl_last_error", {"r.log": ["[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL "
                                           "library.", "[rank1]: Last error:", "[rank1]: Duplicate GPU detected : rank "
                                           "1 and rank 0 both on CUDA device 1a000"]}, "config", 0.65),
    # the one quoted CUDA error that is the memory's: NCCL's allocation failed, oom, not a GPU fault
    ("meaning.nccl_last_error", {"r.log": ["[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
                                           "distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error (run with "
                                           "NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
                                           "[rank0]: ncclUnhandledCudaError: Call to CUDA function failed.",
                                           "[rank0]: Last error:", "[rank0]: Cuda failure 'out of memory'"]}, "oom", 0.65),
    # a timeout that no line explains: a rank that never reached the collective (TAXONOMY), weakly; a transport
    # error among the lines keeps the network reading
    ("network.nccl_only", {"c.log": ["[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the "
                                     "entire process down."]}, "software", 0.3),
    ("network.nccl_only", {"c.log": ["RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
                                     "closed by peer [10.0.0.7]:25231"]}, "network", 0.3),
    # the watchdog states a timeout set far below every framework's default: TAXONOMY's timeout too short for a long
    # phase (old and current c10d wordings); at the default it stays the rank-that-never-arrived reading
    ("network.nccl_only", {"c.log": ["[E ProcessGroupNCCL.cpp:567] [Rank 1] Watchdog caught collective operation "
                                     "timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=60000) ran for 66720 milliseconds "
                                     "before timing out."]}, "config", 0.3),
    ("network.nccl_only", {"r.log": ["[rank3]:[E1105 03:35:19.029862549 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog "
                                     "caught collective operation timeout: WorkNCCL(SeqNum=52, OpType=ALLREDUCE, "
                                     "NumelIn=1, NumelOut=1, Timeout(ms)=120000) ran for 120043 milliseconds before "
                                     "timing out."]}, "config", 0.3),
    ("network.nccl_only", {"r.log": ["[rank3]:[E1105 03:35:19.029862549 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog "
                                     "caught collective operation timeout: WorkNCCL(SeqNum=52, OpType=ALLREDUCE, "
                                     "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 milliseconds before "
                                     "timing out."]}, "software", 0.3),
    ("collective.mismatch", {"c.log": ["RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running "
                                       "inconsistent collective: CollectiveFingerPrint(OpType=BROADCAST, TensorShape=[4]"]},
     "software", 0.8),
    ("storage.disk_full", {"rank_0.log": ["[rank0]: OSError: [Errno 28] No space left on device: "
                                          "'/checkpoints/iter_0001000/model.pt'"]}, "storage_io", 0.85),
    ("storage.batch_loader", {"rank_4.log": ["[rank4]: lhotse.ais.batch_loader.AISBatchLoaderError: Sequential GET "
                                             "fallback failed for shard-000123/utt-42.flac"]}, "storage_io", 0.75),
    # the scheduler's record of the job's end (sacct, scontrol, seff, its mail) says what its banner says: the
    # batch script's output has no banner; the other nodes' IB errors towards the dead node are its consequence
    ("scheduler.slurm_cancel", {"job_info.txt": ["JobId=7710452 JobName=llm-sft",
                                                 "   JobState=NODE_FAIL Reason=NodeDown Dependency=(null)"],
                                "node0.log": ["[2025-03-04 02:10:58] gpu-a017:71203:71410 [3] transport/net_ib.cc:2453 "
                                              "NCCL WARN NET/IB: Got completion from peer 10.12.4.18<47212> with status=12 "
                                              "opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.12.4.17 "
                                              "remoteGids::ffff:10.12.4.18 hca mlx5_2"]}, "infrastructure", 0.9),
    ("scheduler.slurm_cancel", {"sacct.txt": ["JobID           JobName  Partition    Account  AllocCPUS      State ExitCode",
                                              "5530912           vit-l14       a100     vision         64    TIMEOUT      0:0"],
                                "out.log": ["srun: error: gpu-e001: tasks 0-7: Terminated"]}, "infrastructure", 0.9),
    # sacct's OUT_OF_ME+ is the memory evidence a SIGKILLed task needs (TAXONOMY: with it, oom)
    ("oom.host_oom", {"sacct.txt": ["4891784          pretrain        gpu    ml-team        256 OUT_OF_ME+    0:125"],
                      "slurm-4891784.out": ["srun: error: gpu-node-03: task 4: Killed"]}, "oom", 0.85),
    ("scheduler.slurm_cancel", {"slurm-9.out": ["slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT "
                                                "2024-11-05T12:34:56 DUE TO TIME LIMIT ***"]}, "infrastructure", 0.9),
    ("config.port_in_use", {"c.log": ["torch.distributed.DistNetworkError: The server socket has failed to listen on "
                                      "any local network address. The server socket has failed to bind to [::]:29500 "
                                      "(errno: 98 - Address already in use)."]}, "config", 0.9),
    ("data.nan_loss", {"c.log": ["FloatingPointError: Loss became infinite or NaN at iteration=1!"]}, "numerical", 0.8),
    # /dev/shm: the same ENOSPC line is infrastructure, not a full disk
    ("infra.shm", {"c.log": ["include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device"]},
     "infrastructure", 0.85),
    ("software.exception", {"rank_0.log": ["[rank0]: Traceback (most recent call last):",
                                           '[rank0]:   File "train.py", line 3, in <module>',
                                           "[rank0]: KeyError: 'labels'"]}, "software", 0.45),
    # Megatron's rerun verdicts (megatron/core/rerun_state_machine.py) explain the NaN line before them: the same GPU
    # gave another result (transient: that GPU) ...
    ("gpu.rerun_verdict", {"rank12.log": [_RERUN_NAN, _RERUN.format("gpu-a-0031", 4, "Possible transient error!")]},
     "gpu_cuda", 0.9),
    # (core 0.10-0.12 print the verdict without the iteration: `Rank R, node N, device D: <what>!`)
    ("gpu.rerun_verdict", {"rank41.log": [_RERUN_NAN, "ERROR:megatron.core.rerun_state_machine:Rank 41, node gpu-c-06, "
                                                      "device 1: Possible transient error!!"]},
     "gpu_cuda", 0.9),
    # ... it reproduced on the first GPU only (persistent: the FIRST GPU, named by its `First rerun` line, not the
    # second one that prints the verdict) ...
    ("gpu.rerun_verdict", {"rank12.log": [_RERUN_NAN, _RERUN.format("gpu-a-0031", 4, _FIRST_RERUN),
                                          _RERUN.format("gpu-b-0107", 1, "Possible persistent error!")]},
     "gpu_cuda", 0.9),
    # ... or on another GPU too (the numbers themselves)
    ("gpu.rerun_verdict", {"rank12.log": [_RERUN_NAN, _RERUN.format("gpu-a-0031", 4, _FIRST_RERUN),
                                          _RERUN.format("gpu-b-0107", 1, "Correct result (but possible Application "
                                                        "error) (found NaN in local forward loss calculation)!")]},
     "numerical", 0.9),
    # Slurm's own memory enforcement killed the step (jobacct_gather.c): memory, though srun only says `Killed`, and
    # the kernel's OOM killer with the pid torchrun reports as SIGKILLed: the killer is named, not "from outside"
    ("oom.host_oom", {"slurm-62019.out": [
        "slurmstepd: error: StepId=62019.0 exceeded memory limit (515398172672 > 515396075520), being killed",
        "srun: Exceeded job memory limit", "srun: error: gpu-d-012: task 0: Killed"]}, "oom", 0.85),
    # slurmstepd's SIG_REQUEUED wording: the scheduler ended the run
    ("scheduler.slurm_cancel", {"slurm.out": ["slurmstepd: error: *** JOB 4891784 ON gpu-node-17 CANCELLED AT "
                                              "2024-11-05T12:34:56 DUE TO JOB REQUEUE ***"]}, "infrastructure", 0.85),
    # a DataLoader worker's end by the signal PyTorch names (DataLoader.cpp): a native crash is the code's ...
    ("data.loader_worker_died", {"rank_0.log": ["[rank0]: RuntimeError: DataLoader worker (pid 40412) is killed by "
                                                "signal: Segmentation fault. "]}, "software", 0.6),
    # ... a SIGKILL with no memory evidence anywhere is something outside (TAXONOMY), and says the evidence is missing
    ("data.loader_worker_died", {"rank_2.log": ["[rank2]: RuntimeError: DataLoader worker (pid 81234) is killed by "
                                                "signal: Killed. "]}, "infrastructure", 0.6),
    # ... and a worker that died with no signal died of its own sample's error
    ("data.loader_worker_died", {"rank_0.log": ["[rank0]: RuntimeError: DataLoader worker (pid(s) 23456) exited "
                                                "unexpectedly"]}, "data", 0.5),
    # a socket interface that reaches no other host (Docker's bridge), printed before gloo's connect timeout
    ("config.nccl_interface", {"rank8.log": [
        "GLOO_SOCKET_IFNAME=docker0", "MASTER_ADDR=10.20.0.11 MASTER_PORT=29500 WORLD_SIZE=16 NODE_RANK=1",
        "[rank8]: RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/"
        "gloo/transport/tcp/pair.h:311] Connect timeout [172.17.0.1]:38127"]}, "config", 0.8),
    # a peer that advertised the loopback address /etc/hosts gives its host name
    ("config.nccl_interface", {"rank3.log": [
        "MASTER_ADDR=10.20.0.11 WORLD_SIZE=16 NODE_RANK=1", "[rank3]: RuntimeError: Gloo connectFullMesh failed with "
        "[../third_party/gloo/gloo/transport/tcp/pair.h:311] Connect timeout [127.0.1.1]:41521"]}, "config", 0.7),
    # AIStore's SDK reader gave up on the store's stream, inside a DataLoader worker: the store's, not the sample's
    ("software.exception", {"rank_5.log": [
        "[rank5]: Traceback (most recent call last):",
        "[rank5]: aistore.sdk.obj.obj_file.errors.ObjectFileReaderMaxResumeError: Caught ObjectFileReaderMaxResumeError "
        "in DataLoader worker process 1."]}, "storage_io", 0.75),
    # CUDA touched in a DataLoader worker, raised from the sample's __getitem__: the code's, not the sample's
    ("software.exception", {"rank_0.log": [
        "[rank0]: Traceback (most recent call last):", "[rank0]: RuntimeError: Caught RuntimeError in DataLoader worker "
        "process 0.", "[rank0]: Original Traceback (most recent call last):",
        '[rank0]:   File "/opt/app/data.py", line 41, in __getitem__', "[rank0]:     x = x.cuda()",
        "[rank0]: RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you "
        "must use the 'spawn' start method"]}, "software", 0.75),
    # PyTorch's shared-memory segment (MapAllocator.cpp) full inside a worker: /dev/shm, not a disk
    ("software.exception", {"rank_1.log": ["[rank1]: Traceback (most recent call last):",
                                           '[rank1]:   File "train.py", line 9, in <module>',
                                           "[rank1]: RuntimeError: unable to write to file </torch_18693_3305722262_0>: "
                                           "No space left on device (28)"]}, "infrastructure", 0.75),
    # spawn's parent raising ProcessExitedException at the end of its own traceback: that traceback is the kill's
    # report, not another error (it was "a stack trace whose exception line is cut off")
    ("infra.killed_from_outside", {"train.log": [
        "Traceback (most recent call last):", '  File "/opt/app/train.py", line 88, in <module>',
        "    mp.spawn(worker, nprocs=4)",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 196, in join',
        "    raise ProcessExitedException(",
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL"]},
     "infrastructure", 0.5),
    # the cloud took the machine: Azure's Scheduled Events document, Compute Engine's system event operation
    ("catalog.weighted_patterns", {"events.json": ['{"DocumentIncarnation":3,"Events":[{"EventId":"A123BC45","EventStatus":'
                                                   '"Scheduled","EventType":"Preempt","ResourceType":"VirtualMachine",'
                                                   '"Resources":["ndv5-spot-vmss_3"]}]}']}, "infrastructure", 0.85),
    ("catalog.weighted_patterns", {"ops.txt": ["systemevent-1741057921000-62f1a0c3e9b84  compute.instances.preempted  "
                                               "us-central1-a/instances/a3-spot-train-2  200  DONE  "
                                               "2025-03-03T19:12:01.000-08:00"]}, "infrastructure", 0.85),
    # Slurm ≤23.02's banner for the node's uncorrectable memory error: the node's RAM, not a GPU (the lexicon's
    # `uncorrectable` would have said GPU)
    ("scheduler.slurm_cancel", {"slurm.out": ["slurmstepd: error: *** STEP 9120044.0 ON nid001284 UNCORRECTABLE MEMORY "
                                              "ERROR AT 2024-06-12T22:41:09 ***"]}, "infrastructure", 0.85),
    # a quota, not a full volume: said as what it is (EDQUOT)
    ("storage.disk_full", {"rank_0.log": ["[rank0]: OSError: [Errno 122] Disk quota exceeded: "
                                          "'/lustre/proj/ckpt/iter_0002000/model.pt'"]}, "storage_io", 0.85),
    # Lightning's SLURM auto-requeue: the allocation ended at the scheduler's time-limit warning (signal_connector.py)
    ("catalog.weighted_patterns", {"slurm-5512.out": ["Epoch 12:  77%|###  | 3080/4000 [1:12:44<21:43,  0.71it/s]",
                                                      "Handling auto-requeue signal: 10", "requeing job 5512...",
                                                      "Requeued SLURM job: 5512"]}, "infrastructure", 0.7),
    # Ray re-raises a remote task's error as RayTaskError(<cause>): the cause's class is read, here Ray's memory
    # monitor's (python/ray/exceptions.py), alone in a paste without its traceback
    ("software.exception", {"driver.log": ["ray.exceptions.RayTaskError(OutOfMemoryError): ray::TrainTrainable.train() "
                                           "(pid=1234, ip=10.0.0.5)"]}, "oom", 0.6),
    # a cause whose class says nothing of the fault: a program error, weak (it was "no fault found")
    ("software.exception", {"driver.log": ["ray.exceptions.RayTaskError(KeyError): ray::TrainTrainable.train() "
                                           "(pid=1234, ip=10.0.0.5)"]}, "software", 0.35),
]

FIRE += [
    # a weighted catalog pattern is a root candidate by itself (tools/rules/catalog.py)
    ("catalog.weighted_patterns", {"rank_0.log": ["[rank0]: Current loss scale already at minimum - cannot decrease "
                                                  "scale anymore. Exiting run."]}, "numerical", 0.85),
    # two ranks' watchdogs fired on the same SeqNum of the same group in different collectives: a code-path split
    ("collective.op_differs", {f"rank_{r}.log": [
        f"[rank{r}]:[E601 04:33:10.100000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum=812, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600011 "
        "milliseconds before timing out."] for r, op, n in ((0, "ALLREDUCE", 1), (1, "ALLREDUCE", 1),
                                                            (2, "BROADCAST", 9), (3, "ALLREDUCE", 1))},
     "software", 0.7),
    # the odd rank said why it left the others' path before its timeout (HF Trainer: its IterableDataset shard ran
    # dry, so it went to the end-of-training barrier while the others waited in the next step's all-reduce): data
    ("collective.op_differs", {f"rank_{r}.log": (
        ["[rank3]:[WARNING|trainer.py:2568] 2024-06-01 04:23:08,552 >> There seems not to be a single sample in your epoch_iterator, stopping "
         "training at step 12412! This is expected if you're using an IterableDataset and set num_steps (20000) higher "
         "than the number of available samples."] if r == 3 else []) + [
        f"[rank{r}]:[E601 04:33:10.100000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum=812, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600011 "
        "milliseconds before timing out."] for r, op, n in ((0, "ALLREDUCE", 9), (1, "ALLREDUCE", 9),
                                                            (2, "ALLREDUCE", 9), (3, "BARRIER", 1))},
     "data", 0.75),
    # a worker SIGKILLed with nothing in its own log: killed from outside (torch 2.13 report, eval/lab)
    ("infra.killed_from_outside", {"torchrun.out": [
        "[1]:", "  time      : 2026-11-22_09:49:53", "  host      : localhost", "  rank      : 1 (local_rank: 1)",
        "  exitcode  : -9 (pid: 14548)  (SIGKILL)", "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 14548"]}, "infrastructure", 0.6),
    # Open MPI's launcher says the same of a process it started
    ("infra.killed_from_outside", {"mpirun.log": ["mpirun noticed that process rank 3 with PID 0 on node gpu-04 "
                                                  "exited on signal 9 (Killed)."]}, "infrastructure", 0.5),
    # the launcher says workers failed and nothing else does: weak, so the answer stays inconclusive
    ("software.workers_failed", {"torchrun.out": [
        "E1122 09:48:27.968000 13125 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
        "local_rank: 0 (pid: 13128) of binary: /usr/bin/python"]}, "software", 0.2),
    # a paste that stops inside its traceback: weak software, and the missing end is named
    ("software.exception", {"combined.log": ["Traceback (most recent call last):",
                                             '  File "/gpt-neox/train.py", line 34, in <module>', "    main()"]},
     "software", 0.25),
    ("oom.host_oom", {"rank_2.log": ["[rank2]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. "
                                     "DefaultCPUAllocator: can't allocate memory: you tried to allocate 268435456 bytes. "
                                     "Error code 12 (Cannot allocate memory)"]}, "oom", 0.85),
]

FIRE += [
    # a typo of NCCL_SOCKET_IFNAME, then a socket failure: the intended setting never took effect
    ("config.unknown_variable", {"rank_0.log": [
        "+ export NCCL_SOCKET_IFNAM=ib0",
        "node1:2345:2400 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 172.17.0.3<44313> failed : "
        "Software caused connection abort"]}, "config", 0.8),
    # the same typo before an unrelated crash: weak context only
    ("config.unknown_variable", {"rank_0.log": [
        "NCCL_SOCKET_IFNAM=ib0", "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]},
     "config", 0.25),
    # a dataset index build on rank 0 never finished; the others hit the default 10-min watchdog
    ("config.default_timeout_phase", {
        "rank_0.log": ["[rank0]: \tBuild and save the document index to 6a1c0b2e-GPTDataset-train-document_index.npy"],
        "rank_1.log": ["[rank1]:[E1105 12:14:45.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
                       "operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)"
                       " ran for 600031 milliseconds before timing out."]}, "config", 0.6),
    # a printed GLOO_SOCKET_IFNAME that gloo cannot find
    ("config.nccl_interface", {"rank_0.log": [
        "GLOO_SOCKET_IFNAME=eth1", "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] "
        "ifa != nullptr. Unable to find address for: eth1"]}, "config", 0.85),
    # every log stops in c10d's store setup (socket.cpp, distributed_c10d.py's store barrier): the process group
    # never formed
    ("config.stopped_in_store_setup", {
        "rank0.log": ["Using distributed PyTorch with gloo backend",
                      "[I socket.cpp:462] [c10d - debug] The server socket is attempting to listen on [::]:23456.",
                      "[I socket.cpp:522] [c10d] The server socket has started to listen on [::]:23456."],
        "rank1.log": ["[rank1]: INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize "
                      "process group for rank: 1, key: store_based_barrier_key:1 (world_size=4, worker_count=2, "
                      "timeout=0:30:00)"]}, "config", 0.4),
    # the trainers' own words for "calling init_process_group now" (DeepSpeed's init_distributed, Megatron's
    # _initialize_distributed), and nothing after
    ("config.stopped_in_store_setup", {
        "rank0.log": ["[2024-06-11 00:23:36,254] [INFO] [comm.py:637:init_distributed] cdb=None",
                      "[2024-06-11 00:23:36,254] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in "
                      "DeepSpeed with backend nccl"],
        "rank1.log": ["[2024-06-11 00:23:36,296] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in "
                      "DeepSpeed with backend nccl"]}, "config", 0.4),
    ("config.stopped_in_store_setup", {"train.out": ["using world size: 16, data-parallel size: 16",
                                                     "> initializing torch distributed ..."]}, "config", 0.4),
    # Lightning's members announced themselves and the logs stop there, rank 0 never saying all registered: half the
    # world (the second node) never joined
    ("config.stopped_in_lightning_init", {
        "node0.out": ["GPU available: True (cuda), used: True",
                      *(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8" for r in range(4)),
                      "JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"]}, "config", 0.4),
]

FIRE += [
    # Kubernetes says OOMKilled: host memory, whatever exit code the agent left (tools/sources/k8s.py)
    ("oom.container_oom", {"describe.txt": ["Node:         gpu-node-17/10.0.3.17", "    State:          Terminated",
                                            "      Reason:       OOMKilled", "      Exit Code:    1"]}, "oom", 0.9),
    # exit 137 and nothing about memory anywhere: killed from outside (TAXONOMY edge case)
    ("infra.container_sigkill", {"describe.txt": ["      Reason:       Error", "      Exit Code:    137"]},
     "infrastructure", 0.6),
    ("infra.k8s_node_lost", {"events.txt": ["2m23s       Normal    NodeNotReady   node/gpu-node-23   Node gpu-node-23 "
                                            "status is now: NodeNotReady"]}, "infrastructure", 0.75),
    # no node could take the pod and nothing shows it placed later: the job never ran
    ("scheduler.k8s_unschedulable", {"events.txt": ["2m          Warning   FailedScheduling   pod/trainer-0   0/64 nodes "
                                                    "are available: 64 Insufficient nvidia.com/gpu."]},
     "infrastructure", 0.8),
]

FIRE += [
    # the fp16 loss scaler driven below 1 (fairseq's trainer notes; apex's and DeepSpeed's step-downs read the same):
    # the loss is exploding, the paste stops before the scaler gives up
    ("data.loss_scale_collapse", {"train.log": [
        "2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, gnorm=156.036, loss_scale=0",
        "2020-03-23 11:41:18 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.00048828125",
        "2020-03-23 11:48:04 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.000244140625"]},
     "numerical", 0.45),
    ("data.loss_scale_collapse", {"rank0.log": [
        "[2024-05-02 10:11:12,345] [INFO] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1.0, "
        "reducing to 0.5"]}, "numerical", 0.45),
    # DeepSpeed's fp16 optimizer pinned at min_loss_scale (1): its step-downs leave the scale at 1, every step skipped
    ("data.loss_scale_collapse", {"rank0.log": [
        f"[2025-02-11 03:12:5{i},021] [INFO] [fused_optimizer.py:393:step] Reducing dynamic loss scale from 1.0 to 1.0"
        for i in range(3)]}, "numerical", 0.45),
]

QUIET = [
    # the store came up and a client connected, or a later line followed: the group formed
    ("config.stopped_in_store_setup", {"rank0.log": [
        "[I socket.cpp:522] [c10d] The server socket has started to listen on [::]:23456.",
        "[I socket.cpp:950] [c10d] The client socket has connected to [node-0]:23456 on [node-0]:51234."]}),
    ("config.stopped_in_store_setup", {"rank0.log": [
        "[I socket.cpp:522] [c10d] The server socket has started to listen on [::]:23456.", "epoch 0 step 1 loss 2.3"]}),
    # DeepSpeed's `cdb=None` is logged on entry to init_distributed even when torch.distributed is already up
    ("config.stopped_in_store_setup", {"rank0.log": [
        "[WARNING] [comm.py:152:init_deepspeed_backend] NCCL backend in DeepSpeed not yet implemented",
        " [INFO] [comm.py:594:init_distributed] cdb=None"]}),
    ("config.stopped_in_store_setup", {"rank0.log": [
        "[2024-06-11 00:23:36,254] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in DeepSpeed with "
        "backend nccl", "[2024-06-11 00:23:41,002] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: "
        "version=0.13.0, git-hash=unknown, git-branch=unknown"]}),
    # overflow step-downs at ordinary scales are the scaler doing its job
    ("data.loss_scale_collapse", {"train.log": [
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768"]}),
    # every member joined (rank 0 said so), or the run went on long after the announcements
    ("config.stopped_in_lightning_init", {"node0.out": [
        *(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/2" for r in range(2)),
        "All DDP processes registered. Starting ddp with 2 processes"]}),
    ("config.stopped_in_lightning_init", {"node0.out": [
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2", "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2",
        *(f"Epoch 0:  {i}%|##| {i}/100 [00:{i:02d}<00:10, loss=2.3{i % 10}]" for i in range(20))]}),
    # NCCL gave no reason (c10d prints `Unknown NCCL Error`), or one its table does not call a trigger
    ("meaning.nccl_last_error", {"r.log": ["[rank1]: Last error: Unknown NCCL Error"]}),
    # every process inside a collective: nobody is stuck on data
    ("data.loader_stall_in_dumps", {"dump.log": ["    all_reduce (torch/distributed/distributed_c10d.py:1316)"]}),
    # a WARN that does not say which NCCL source printed it: no subsystem to blame
    ("network.nccl_subsystem", {"n.log": ["NCCL WARN NCCL_SOCKET_NTHREADS is set but ignored"]}),
    # a WARN NCCL's own table documents as handled (a setting capped, a fallback taken): no fault of the transport
    ("network.nccl_subsystem", {"n.log": ["gpu-v1:77:310 [0] transport/net_socket.cc:353 NCCL WARN NET/Socket : "
                                          "NCCL_SOCKET_NTHREADS is greater than the maximum allowed, setting to 16"]}),
    # NCCL naming the interface it picked is not a failure to find one
    ("config.nccl_interface", {"n.log": ["node1:1234:1300 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"]}),
    # an allocator line that succeeded
    ("oom.accelerator_alloc", {"a.log": ["I1105 12:00:00 bfc_allocator.cc:123] Allocated 1.5GiB for the KV cache"]}),
    # SIGTERM is the launcher stopping the others: cascade, not a kill from outside
    ("infra.killed_from_outside", {"torchrun.out": [
        "[2]:", "  host      : localhost", "  rank      : 2 (local_rank: 2)", "  exitcode  : -15 (pid: 14549)  (SIGTERM)"]}),
    ("infra.killed_from_outside", {"mpirun.log": ["mpirun noticed that process rank 3 with PID 0 on node gpu-04 "
                                                  "exited on signal 15 (Terminated)."]}),
    # PyTorch's own shared-memory segment (/torch_<pid>_<n>) is /dev/shm too (loader.torch_shm_full)
    ("storage.disk_full", {"c.log": ["RuntimeError: unable to write to file </torch_311_2376812911>: No space left on "
                                     "device (28)"]}),
    # a disk-full line that is really /dev/shm is not storage
    ("storage.disk_full", {"c.log": ["include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device"]}),
    # recovering retries are noise: no storage candidate
    ("storage.retries_exhausted", {"rank_0.log": ["[rank0]: W1105 12:02:10.000000 1 s.py:8] GET x failed, retrying 1/5: "
                                                  "Connection reset by peer"]}),
    # a traceback that ends in a collective timeout is the wait, not the bug
    ("software.exception", {"rank_0.log": ["[rank0]: Traceback (most recent call last):",
                                           '[rank0]:   File "train.py", line 9, in <module>',
                                           "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
                                           "unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to "
                                           "complete"]}),
    # healthy ECC counters are not an ECC error
    ("gpu.ecc", {"smi.txt": ["        Volatile Uncorr. ECC errors: 0"]}),
    ("network.nccl_only", {"rank_0.log": ["[rank0]: step 10 loss 2.3"]}),
    # real variables (NCCL's, PyTorch's deprecated alias, a plugin's) before a failure: no claim
    ("config.unknown_variable", {"rank_0.log": ["NCCL_IB_HCA=mlx5_0", "NCCL_ASYNC_ERROR_HANDLING=1",
                                                "NCCL_OFI_NIC_DUP_CONNS=4", "TORCH_NCCL_TRACE_BUFFER_SIZE=2000",
                                                "[rank0]: torch.OutOfMemoryError: CUDA out of memory."]}),
    # a default timeout with no long phase running: every job has one, it is no evidence
    ("config.default_timeout_phase", {"rank_1.log": [
        "[rank1]: iteration 100 loss 2.1",
        "[rank1]:[E1105 12:14:45.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 "
        "milliseconds before timing out."]}),
]


FIRE += [
    # ranks waited in the store for rank 0's NCCL unique id until the store's own timeout (ProcessGroupNCCL.cpp
    # broadcastUniqueNCCLID): rank 0 never reached the first collective; it is named, weakly
    ("collective.unique_id_root", {f"rank_{r}.log": [
        f"[rank{r}]: torch.distributed.DistBackendError: [{r}] is setting up NCCL communicator and retrieving "
        f"ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after "
        "1800000ms, keys: /default_pg/0//cuda//0"] for r in (1, 2, 3)}, "software", 0.4),
    # the same wait before torch 2.0: the blocking recv of the key ran out (c10d/Utils.hpp recvBytes), on a paste
    # that cut the DistBackendError off the front of the line
    ("collective.unique_id_root", {"combined.log": [
        "This may indicate a possible application crash on rank 0 or a network set up issue.[7] is setting up NCCL "
        "communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') "
        "got error: Socket Timeout",
        "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:604 (most recent call first)"]},
     "software", 0.4),
]


FIRE += [
    # sinfo -R's `Not responding` for one of the job's nodes (its host list, expanded): the node went down
    ("scheduler.node_not_responding", {"job.out": ["SLURM_JOB_NODELIST=gpu-h[031-032]"],
                                       "sinfo.txt": ["REASON               USER      TIMESTAMP           NODELIST",
                                                     "Not responding       slurm     2025-03-04T02:11:09 gpu-h032"]},
     "infrastructure", 0.7),
]
QUIET += [
    # another node of the cluster: sinfo lists them all
    ("scheduler.node_not_responding", {"job.out": ["SLURM_JOB_NODELIST=gpu-h[031-032]"],
                                       "sinfo.txt": ["Not responding       slurm     2025-03-04T02:11:09 gpu-h101"]}),
]
_DOCKER0 = ["gpu-node-11:2210:2210 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>",
            "gpu-node-11:2210:2301 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>"]
FIRE += [
    # NCCL's default pick was the Docker bridge, and the connect that failed went to a bridge address (every host has
    # 172.17.0.1): a launch setting (TAXONOMY: a wrong interface at start-up is config), not the fabric
    ("config.nccl_interface", {"output.txt": _DOCKER0 + [
        "gpu-node-11:2210:2301 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 172.17.0.1<43123> "
        "failed : Software caused connection abort"]}, "config", 0.8),
]
QUIET += [
    # the same pick, but the connect that failed went to a real host's address: that is no bridge's doing
    ("config.nccl_interface", {"output.txt": _DOCKER0 + [
        "gpu-node-11:2210:2301 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.3.17<43123> "
        "failed : Connection refused"]}),
    # the store itself went away (its server's process died, or the address is wrong): not a key that never came
    ("collective.unique_id_root", {"rank_3.log": [
        "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId "
        "from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer"]}),
    # rank 0's own log shows why it never published: its error is the story, not the waiting
    ("collective.unique_id_root", {
        "rank_0.log": ["[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                       "total capacity of 79.10 GiB of which 1.23 GiB is free."],
        "rank_1.log": ["[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving "
                       "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait "
                       "timeout after 600000ms"]}),
    # exit 137 next to a SystemOOM event: the OOM rules own it
    ("infra.container_sigkill", {"describe.txt": ["      Exit Code:    137", "  Warning  SystemOOM  3m  kubelet  System "
                                                  "OOM encountered, victim process: python, pid: 3419"]}),
    # exit 137 after the kubelet killed the container for its failed liveness probe: the probe's reading names the killer
    ("infra.container_sigkill", {"describe.txt": [
        "      Exit Code:    137",
        "  Warning  Unhealthy  3m (x3 over 4m)  kubelet  Liveness probe failed: Get \"http://10.8.0.12:8080/healthz\": "
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        "  Normal   Killing    3m  kubelet  Container trainer failed liveness probe, will be restarted"]}),
    # the pod waited for the autoscaler, then was placed: FailedScheduling is history
    ("scheduler.k8s_unschedulable", {"describe.txt": [
        "  Warning  FailedScheduling  38m  default-scheduler  0/63 nodes are available: 63 Insufficient nvidia.com/gpu.",
        "  Normal   Scheduled  37m  default-scheduler  Successfully assigned ml/trainer-0 to gpu-node-17"]}),
]


# a rank that died of a signal with no line of its own: the launcher's return code names it (negative = signal)
_DS_EXIT = "[2024-05-02 10:11:12,345] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', " \
    "'--local_rank=1'] exits with return code = {}"
FIRE += [
    ("infra.bus_error", {"launcher.log": [_DS_EXIT.format(-7)]}, "infrastructure", 0.6),
    ("infra.bus_error", {"agent.log": ["E0813 22:08:40.123000 2585 torch/distributed/elastic/multiprocessing/api.py:869]"
                                       " failed (exitcode: -7) local_rank: 0 (pid: 2710) of binary: /usr/bin/python"]},
     "infrastructure", 0.6),
    ("software.native_crash", {"launcher.log": [_DS_EXIT.format(-11)]}, "software", 0.5),
    ("infra.killed_from_outside", {"launcher.log": [_DS_EXIT.format(-9)]}, "infrastructure", 0.5),
]
_WD = "[rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process " \
    "group watchdog thread terminated with exception: CUDA error: {}"
QUIET += [("gpu.cuda_error", {"rank_3.log": [_WD.format("out of memory")]}),  # memory: the OOM rules' reading
          ("gpu.cuda_error", {"rank_3.log": [_WD.format("uncorrectable ECC error encountered")]})]  # gpu.ecc's
QUIET += [("gpu.cuda_error", {"rank_3.log": [  # the watchdog ended by a timeout: the collective's story, not the GPU's
    "[rank3]:[E117 08:28:16.358824199 ProcessGroupNCCL.cpp:1534] [PG 0 (default_pg) Rank 3] Process group watchdog "
    "thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=67, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 milliseconds before timing out."]})]
QUIET += [("infra.killed_from_outside", {"dmesg.txt": [  # the kernel names the killer of the SIGKILLed worker
    "[183402.118231] Out of memory: Killed process 48211 (python) total-vm:98234112kB, anon-rss:61234080kB, "
    "file-rss:81920kB, shmem-rss:2048kB, UID:1000 pgtables:120812kB oom_score_adj:0"],
    "torchrun.log": ["E1105 12:34:57.101000 2585 torch/distributed/elastic/multiprocessing/api.py:869] failed "
                     "(exitcode: -9) local_rank: 0 (pid: 48211) of binary: /usr/bin/python",
                     "Root Cause (first observed failure):", "[0]:", "  time      : 2025-11-05_12:34:57",
                     "  host      : node-3", "  rank      : 0 (local_rank: 0)", "  exitcode  : -9 (pid: 48211)",
                     "  error_file: <N/A>", "  traceback : Signal 9 (SIGKILL) received by PID 48211"]})]
QUIET += [("data.loader_worker_died", {  # the kernel names the killer: oom.host_oom's reading
    "rank_2.log": ["[rank2]: RuntimeError: DataLoader worker (pid 81234) is killed by signal: Killed. "],
    "dmesg.txt": ["[183402.118231] Out of memory: Killed process 81234 (python) total-vm:98234112kB, "
                  "anon-rss:61234080kB, file-rss:81920kB, shmem-rss:2048kB, UID:1000 pgtables:120812kB oom_score_adj:0"]})]
QUIET += [("config.nccl_interface", {"rank3.log": [  # 127.0.0.1 is a peer's real loopback, not a host name's entry
    "MASTER_ADDR=10.20.0.11 WORLD_SIZE=16 NODE_RANK=1", "[rank3]: RuntimeError: Gloo connectFullMesh failed with "
    "[../third_party/gloo/gloo/transport/tcp/pair.h:311] Connect timeout [127.0.0.1]:41521"]}),
    ("config.nccl_interface", {"rank8.log": [  # docker0 on one node (no node index, count or second node): fine
        "GLOO_SOCKET_IFNAME=docker0", "[rank8]: RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/"
        "gloo/transport/tcp/pair.h:311] Connect timeout [172.17.0.1]:38127"]})]
QUIET += [("data.loss_scale_collapse", {"rank0.log": [  # the scaler doing its job: the scale goes down, not stuck
    f"[2025-02-11 03:12:5{i},021] [INFO] [fused_optimizer.py:393:step] Reducing dynamic loss scale from {2 ** (16 - i)}"
    f".0 to {2 ** (15 - i)}.0" for i in range(3)]})]
QUIET += [("infra.bus_error", {"launcher.log": [_DS_EXIT.format(1)]}),      # an exception, not a signal
          ("software.native_crash", {"launcher.log": [_DS_EXIT.format(-6)]})]  # SIGABRT: the watchdog's abort

# the version banners of three nodes, one of them on another NCCL release: config, and that node is the odd one
FIRE += [
    ("config.nccl_version_mismatch", {
        f"{h}.log": [f"{h}:2345:2345 [0] NCCL INFO NCCL version {v}+cuda12.4",
                     f"{h}:2345:2400 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.{i}<0>"]
        for i, (h, v) in enumerate([("gpu-a", "2.21.5"), ("gpu-b", "2.21.5"), ("gpu-c", "2.18.1")])}, "config", 0.7),
]
QUIET += [
    # every node on one release
    ("config.nccl_version_mismatch", {f"{h}.log": [f"{h}:2345:2345 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]
                                      for h in ("gpu-a", "gpu-b")}),
    # an nccl-tests run built against another NCCL than the job's torch: a diagnostic's build, not the job's
    ("config.nccl_version_mismatch", {
        "nccl_tests.log": ["# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
                           "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "NCCL version 2.18.1+cuda12.1"],
        "train.log": ["NCCL version 2.21.5+cuda12.4"]}),
    # one console holding two runs, before and after an upgrade: not two nodes of one job
    ("config.nccl_version_mismatch", {"train.log": ["gpu-a:2345:2345 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
                                                    "gpu-a:2399:2399 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]}),
]


_MAIN_FIRST = ["[rank1]: Traceback (most recent call last):",
               '[rank1]:   File "/work/run_clm.py", line 512, in main',
               '[rank1]:     with training_args.main_process_first(desc="dataset map tokenization"):',
               '[rank1]:   File "/usr/lib/python3.10/contextlib.py", line 135, in __enter__',
               "[rank1]:     return next(self.gen)",
               '[rank1]:   File "/opt/venv/lib/python3.10/site-packages/transformers/training_args.py", line 2310, in '
               "main_process_first",
               "[rank1]:     dist.barrier()"]
# the waiting rank's barrier timed out while the main process was still mapping the dataset: the long phase's
FIRE += [("config.main_process_first_wait", {"rank_1.log": _MAIN_FIRST + [
    "[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from "
    "[0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 1800000ms"]},
    "config", 0.55)]
# a paste cut inside the wait's traceback: c10d's socket warning printed as the wait failed, just before it
_SOCKET_WAIT = "[rank1]:[W socket.cpp:432] [c10d] While waitForInput, poolFD failed with (errno: 0 - Success)."
FIRE += [("config.main_process_first_wait", {"rank_1.log": [_SOCKET_WAIT] + _MAIN_FIRST[:5]}, "config", 0.55)]
# the same wait ended by something other than a timeout: not a phase that outlasted it, even with a recovered
# timeout warning earlier in the file; and a cut traceback whose only timeout line is far from it
_EARLIER = ["[rank1]:[W socket.cpp:663] [c10d] The client socket has timed out after 60s while trying to connect to "
            "(node0, 29500)."] + [f"[rank1]: step {i} loss 2.{i % 10}" for i in range(300)]
QUIET += [("config.main_process_first_wait", {"rank_1.log": _EARLIER + _MAIN_FIRST + [
    "[rank1]: RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version "
    "2.19.3"]}),
    ("config.main_process_first_wait", {"rank_1.log": _EARLIER + _MAIN_FIRST[:5]})]


def test_an_oom_no_line_attributes_says_so(facts_from):
    """A paste with no rank prefix: the summary says no line names the rank, not `rank(s) ?`."""
    c = BY_NAME["oom.cuda_oom"](facts_from({"paste.log": [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.10 GiB of which 1.23 GiB is free."]}))[0]
    assert c.ranks == [] and "on a rank no line names" in c.summary and "?" not in c.summary


def test_deepspeed_exit_line_names_no_rank(facts_from):
    """DeepSpeed's handler prints the argv of the last process it launched, not the one that exited: `--local_rank=1`
    in it names no culprit (a torchrun agent line's `local_rank: 0` does)."""
    for rule, code in (("infra.bus_error", -7), ("software.native_crash", -11), ("infra.killed_from_outside", -9)):
        c = BY_NAME[rule](facts_from({"launcher.log": [_DS_EXIT.format(code)]}))[0]
        assert c.ranks == [], (rule, c.ranks)
    agent = BY_NAME["infra.bus_error"](facts_from({"agent.log": [
        "E0813 22:08:40.123000 2585 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -7) "
        "local_rank: 3 (pid: 2710) of binary: /usr/bin/python"]}))[0]
    assert agent.ranks == [3]


def test_a_quota_is_not_said_to_be_a_full_disk(facts_from):
    from trainlog_debugger.tools.rules.storage import disk_full
    (c,) = disk_full(facts_from({"r.log": ["OSError: [Errno 122] Disk quota exceeded: '/lustre/proj/x.pt'"]}))
    assert "quota" in c.summary and "filled up" not in c.summary


def test_a_rerun_verdict_at_warning_level_is_a_non_fatal_check(facts_from):
    """Megatron logs a fatal check's verdict with logger.error and a non-fatal one's with logger.warning (the run
    continues): only the first decides."""
    line = ("WARNING:megatron.core.rerun_state_machine:Rank 14, node gpu-t-02, device 6, iteration #14913: Possible "
            "transient error!!")
    (c,) = BY_NAME["gpu.rerun_verdict"](facts_from({"rank14.log": [line]}))
    assert c.strength < 0.5 and c.facts["verdict"] == "not fatal"
    (c,) = BY_NAME["gpu.rerun_verdict"](facts_from({"rank14.log": [line.replace("WARNING:", "ERROR:")]}))
    assert c.strength >= 0.5 and c.category == "gpu_cuda"


def test_rerun_persistent_blames_the_first_gpu(facts_from):
    """The verdict line is printed on the second GPU; the faulty one is the first rerun's."""
    from trainlog_debugger.tools.rules.gpu import rerun_verdict
    f = facts_from({"rank12.log": [_RERUN_NAN, _RERUN.format("gpu-a-0031", 4, _FIRST_RERUN),
                                   _RERUN.format("gpu-b-0107", 1, "Possible persistent error!")]})
    (c,) = rerun_verdict(f)
    assert c.nodes == ["gpu-a-0031"] and c.facts["device"] == 4 and "GPU 4 of gpu-a-0031" in c.summary
    assert [e.line for e in c.evidence] == [3, 2]
    # without the first rerun's line the GPU is not guessed from the verdict's own
    (c,) = rerun_verdict(facts_from({"rank12.log": [_RERUN.format("gpu-b-0107", 1, "Possible persistent error!")]}))
    assert c.nodes == [] and "not in the bundle" in c.summary


def _init(host: str, pid: int, dev: int, rank: int, bus: str) -> str:
    return (f"{host}:{pid}:{pid} [{dev}] NCCL INFO comm 0x55d1c80ba0 rank {rank} nranks 16 cudaDev {dev} nvmlDev {dev} "
            f"busId {bus} commId 0x7c1e2f3a4b5d6e7f - Init COMPLETE")


_INITS = [_init("gpu-node-01", 48113, 3, 3, "5d000"), _init("gpu-node-02", 51223, 3, 11, "5d000"),
          _init("gpu-node-02", 51225, 5, 13, "ab000")]


@pytest.mark.parametrize("files, rank", [
    # the PCI address on the node whose kernel log it is (its file's name): rank 11, not rank 3 on the other node
    ({"dmesg-gpu-node-02.txt": ["[ 91003.118207] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, "
                                "GPU has fallen off the bus."], "slurm.out": _INITS}, 11),
    # the syslog header's host, and the pid
    ({"kern.log": ["Nov  5 07:25:48 gpu-node-02 kernel: NVRM: Xid (PCI:0000:ab:00): 94, pid=51225, name=python3, "
                   "Contained: SM (0x1). RST: No, D-RST: No"], "slurm.out": _INITS}, 13),
    # no node named, and the same bus id on two nodes: no guess
    ({"dmesg.txt": ["[ 91003.118207] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                    "fallen off the bus."], "slurm.out": _INITS}, None),
    # the address and the pid name two different ranks: no guess
    ({"kern.log": ["Nov  5 07:25:48 gpu-node-02 kernel: NVRM: Xid (PCI:0000:5d:00): 94, pid=51225, name=python3, "
                   "Contained: SM (0x1)."], "slurm.out": _INITS}, None),
])
def test_an_xid_names_the_rank_whose_gpu_it_is(facts_from, files, rank):
    (c,) = BY_NAME["gpu.xid"](facts_from(files))
    assert c.ranks == ([rank] if rank is not None else []), c.summary


def test_a_line_the_odd_rank_printed_after_its_timeout_does_not_explain_the_split(facts_from):
    """The odd rank's trigger explains the differing collectives only when it came before that rank's own timeout: a
    line after it is the teardown's, and the split stays the program's (software)."""
    files = {f"rank_{r}.log": [
        f"[rank{r}]:[E601 04:33:10.100000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum=812, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600011 "
        "milliseconds before timing out."] + (
        ["[rank3]:[WARNING|trainer.py:2568] 2024-06-01 04:40:08,552 >> There seems not to be a single sample in your epoch_iterator, stopping "
         "training at step 12412! This is expected if you're using an IterableDataset and set num_steps (20000) higher "
         "than the number of available samples."] if r == 3 else [])
        for r, op, n in ((0, "ALLREDUCE", 9), (1, "ALLREDUCE", 9), (2, "ALLREDUCE", 9), (3, "BARRIER", 1))}
    got = BY_NAME["collective.op_differs"](facts_from(files))
    assert [(c.category, c.ranks) for c in got] == [("software", [3])]


def test_a_warning_every_rank_printed_does_not_explain_why_one_left(facts_from):
    """The odd rank's reason must be its own: a start-up warning that every rank printed (apex built without its CUDA
    extensions, as a table reads flash_attn's nvcc warning) says nothing of why rank 3 alone went to a barrier: the
    split stays the program's."""
    warn = ("2024-06-01 04:00:01,100 WARNING /opt/conda/lib/python3.10/site-packages/flash_attn/__init__.py:12: "
            "UserWarning: flash_attn was requested, but nvcc was not found.  Are you sure your environment has nvcc "
            "available?")
    files = {f"rank_{r}.log": [f"[rank{r}]: {warn}",
        f"[rank{r}]:[E601 04:33:10.100000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum=812, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600011 "
        "milliseconds before timing out."]
        for r, op, n in ((0, "ALLREDUCE", 9), (1, "ALLREDUCE", 9), (2, "ALLREDUCE", 9), (3, "BARRIER", 1))}
    got = BY_NAME["collective.op_differs"](facts_from(files))
    assert [(c.category, c.ranks) for c in got] == [("software", [3])]


def test_nccl_version_mismatch_names_the_odd_node(facts_from):
    files = {f"{h}.log": [f"{h}:2345:2345 [0] NCCL INFO NCCL version {v}+cuda12.4"]
             for h, v in [("gpu-a", "2.21.5"), ("gpu-b", "2.21.5"), ("gpu-c", "2.18.1")]}
    c = BY_NAME["config.nccl_version_mismatch"](facts_from(files))[0]
    assert c.nodes == ["gpu-c"] and c.facts["nccl_versions"] == ["2.18.1", "2.21.5"]
    # five nodes on one release: three named, the rest counted, none dropped silently
    many = {f"gpu-{i}.log": [f"gpu-{i}:2345:2345 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"] for i in range(5)}
    many["gpu-x.log"] = ["gpu-x:2345:2345 [0] NCCL INFO NCCL version 2.18.1+cuda12.4"]
    c5 = BY_NAME["config.nccl_version_mismatch"](facts_from(many))[0]
    assert "(+2 more)" in c5.summary and c5.nodes == ["gpu-x"]
    # two nodes, two releases: nothing says which one is odd
    two = BY_NAME["config.nccl_version_mismatch"](facts_from({k: files[k] for k in ("gpu-a.log", "gpu-c.log")}))[0]
    assert two.nodes == [] and two.ranks == []


# a GID index forced by the environment, then ibv_modify_qp refused with EINVAL (NCCL 2.21's wording, no hint line)
_QP_EINVAL = "roce-gpu-12:6200:6280 [0] misc/ibvwrap.cc:60 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument errno 22"
FIRE += [("config.forced_gid_index", {"node-a.log": [
    "roce-gpu-12:6200:6200 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 5.", _QP_EINVAL]}, "config", 0.8)]
# the same failure with the index left to NCCL: nothing forced, the fabric's reading stays
QUIET += [("config.forced_gid_index", {"node-a.log": [_QP_EINVAL]}),
          ("config.forced_gid_index", {"node-a.log": [
              "roce-gpu-12:6200:6200 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 5.",
              "roce-gpu-12:6200:6280 [0] misc/ibvwrap.cc:60 NCCL WARN Call to ibv_modify_qp failed with error "
              "Connection timed out errno 110"]})]


# Ray's account of a worker that vanished lists what MIGHT have happened; `SIGSEGV` in that list is no crash
QUIET += [("software.native_crash", {"driver.log": [
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
    "unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The "
    "process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The "
    "worker is crashed unexpectedly due to SIGSEGV or other unexpected errors."]})]
FIRE += [("software.native_crash", {"driver.log": [
    "(RayTrainWorker pid=4413, ip=10.20.0.11) *** SIGSEGV received at time=1730800000 on cpu 12 ***"]}, "software", 0.5)]


_DS_MEM = ("[2024-05-02 10:05:16,632] [INFO] [utils.py:789:see_memory_usage] CPU Virtual Memory:  used = {} GB, "
           "percent = {}%")

FIRE += [
    # a SIGKILLed worker after DeepSpeed's last host-memory reading showed the host nearly full: memory evidence (oom)
    ("oom.host_memory_full", {"launcher.log": [_DS_MEM.format("241.18", "96.2"), _DS_EXIT.format(-9)]}, "oom", 0.75),
]
QUIET += [
    ("oom.host_memory_full", {"launcher.log": [_DS_MEM.format("41.18", "16.2"), _DS_EXIT.format(-9)]}),  # not full
    ("oom.host_memory_full", {"launcher.log": [_DS_MEM.format("241.18", "96.2"), _DS_EXIT.format(1)]}),  # no kill
    # memory rose and fell again: only the file's last reading counts
    ("oom.host_memory_full", {"launcher.log": [_DS_MEM.format("241.18", "96.2"), _DS_MEM.format("41.18", "16.2"),
                                               _DS_EXIT.format(-9)]}),
    ("oom.host_memory_full", {"launcher.log": [_DS_MEM.format("1.0", "960.2"), _DS_EXIT.format(-9)]}),  # no percentage
    # a reading dated after the kill explains nothing of it
    ("oom.host_memory_full", {"launcher.log": [_DS_MEM.replace("2024-05-02 10:05", "2024-05-02 11:05").format(
        "241.18", "96.2"), _DS_EXIT.format(-9)]}),
    # with the reading near full the unknown-killer reading steps aside for the memory one
    ("infra.killed_from_outside", {"launcher.log": [_DS_MEM.format("241.18", "96.2"), _DS_EXIT.format(-9)]}),
]

# NCCL's RAS could not bind its client port (another job's RAS on the node holds 28028): the job goes on without it
QUIET += [("config.port_in_use", {"train_output.txt": [
    "[2025-08-30 20:11:06] lambda-h100x8:61510:61510 [0] ras/client_support.cc:160 NCCL WARN Call to bind failed: "
    "Address already in use",
    "lambda-h100x8:61510:61510 [0] NCCL INFO RAS failed to establish a client listening socket at localhost:28028"]})]
FIRE += [("config.port_in_use", {"rank0.log": [
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The "
    "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."]}, "config", 0.9)]

# torchrun's own teardown SIGKILLed the worker that ignored its SIGTERM (stuck in a hung NFS write): its -9 is the
# launcher's, no killer from outside; the same report without the escalation line still is one
_REPORT_9 = ["Root Cause (first observed failure):", "[0]:", "  time      : 2025-10-22_14:29:46",
             "  host      : h100-node-04", "  rank      : 0 (local_rank: 0)", "  exitcode  : -9 (pid: 77188)",
             "  error_file: <N/A>", "  traceback : Signal 9 (SIGKILL) received by PID 77188"]
QUIET += [("infra.killed_from_outside", {"launcher.log": [
    "W1022 14:29:46.120000 77120 torch/distributed/elastic/multiprocessing/api.py:917] Unable to shutdown process "
    "77188 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL", *_REPORT_9]})]
# Python 3.11+ prints the signals as numbers (`via 15, forcefully exiting via 9`): the same teardown
QUIET += [("infra.killed_from_outside", {"launcher.log": [
    "W1022 14:29:46.120000 77120 torch/distributed/elastic/multiprocessing/api.py:917] Unable to shutdown process "
    "77188 via 15, forcefully exiting via 9", *_REPORT_9]})]
FIRE += [("infra.killed_from_outside", {"launcher.log": _REPORT_9}, "infrastructure", 0.6),
         # another node's agent escalated its own worker with the same pid: this node's -9 is still unexplained
         ("infra.killed_from_outside", {"launcher-b.log": _REPORT_9, "launcher-a.log": [
             "W1022 14:29:46.120000 77120 torch/distributed/elastic/multiprocessing/api.py:917] Unable to shutdown "
             "process 77188 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL"]}, "infrastructure", 0.6)]

# horovodrun's gloo launcher ran the worker through a shell: status 137 is SIGKILL (128 + 9), 135 SIGBUS; its process
# index is the rank
FIRE += [("infra.killed_from_outside", {"horovodrun.txt": ["Process 2 exit with status code 137.",
                                                            "Terminating remaining workers after failure of Process 2."]},
          "infrastructure", 0.6),
         ("infra.bus_error", {"horovodrun.txt": ["Process 1 exit with status code 135."]}, "infrastructure", 0.6)]
QUIET += [("infra.killed_from_outside", {"horovodrun.txt": ["Process 2 exit with status code 1."]})]

# an uncorrected PCIe error: the kernel names the device by its driver; a network adapter's is the fabric's
FIRE += [("gpu.pcie_aer", {"c2-n18.journal": [
    "Sep 30 16:42:08 c2-n18 kernel: pcieport 0000:a0:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:a1:00.1",
    "Sep 30 16:42:08 c2-n18 kernel: mlx5_core 0000:a1:00.1: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), "
    "type=Transaction Layer, (Requester ID)"]}, "network", 0.7),
    ("gpu.pcie_aer", {"kern.log": [
        "Sep 30 16:42:08 g-07 kernel: pcieport 0000:80:01.1: AER: Uncorrected (Fatal) error received: 0000:81:00.0",
        "Sep 30 16:42:08 g-07 kernel: nvidia 0000:81:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), "
        "type=Inaccessible, (Unregistered Agent ID)"]}, "gpu_cuda", 0.6)]
# kernels before 4.20 print the device's line without `AER: `
FIRE += [("gpu.pcie_aer", {"kern.log": [
    "mlx5_core 0000:a1:00.1: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, id=00a1(Requester "
    "ID)"]}, "network", 0.7)]
QUIET += [("gpu.pcie_aer", {"kern.log": ["pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:01.0"]})]

# a container's exit 137 after a reading near full: memory evidence (oom), no unknown killer
FIRE += [("oom.host_memory_full", {"worker-0.log": [_DS_MEM.format("241.18", "97.1")],
                                   "describe-pod.txt": ["    State:          Terminated", "      Exit Code:    137"]},
          "oom", 0.75)]
QUIET += [("infra.container_sigkill", {"worker-0.log": [_DS_MEM.format("241.18", "97.1")],
                                       "describe-pod.txt": ["    State:          Terminated", "      Exit Code:    137"]})]


@pytest.mark.parametrize("rule,files,category,strength", FIRE, ids=[f"{r[0]}-{i}" for i, r in enumerate(FIRE)])
def test_rule_fires(facts_from, rule, files, category, strength):
    got = BY_NAME[rule](facts_from(files))
    assert got, f"{rule} did not fire"
    c = got[0]
    assert (c.category, c.strength) == (category, strength)
    assert c.evidence and all(e.line >= 1 and e.text for e in c.evidence)


@pytest.mark.parametrize("rule,files", QUIET, ids=[f"{r[0]}-{i}" for i, r in enumerate(QUIET)])
def test_rule_stays_quiet(facts_from, rule, files):
    assert BY_NAME[rule](facts_from(files)) == []


def test_every_rule_has_a_firing_row():
    assert {r for r, *_ in FIRE} >= set(BY_NAME) - {
        # rules exercised through whole-bundle scenarios in tests/test_diagnose.py
        "gpu.device_assert", "gpu.cuda_library", "network.ib_async", "network.socket", "network.fabric",
        "collective.straggler", "collective.desync", "collective.missing_logs", "collective.flight_recorder",
        "storage.ais_signatures", "storage.retries_exhausted", "storage.io_errors", "storage.ais_chain",
        "scheduler.death_signal",
        "config.rendezvous_timeout", "data.corrupt_data", "infra.bus_error",
        "software.native_crash", "perf.slowdown",
        "data.loss_divergence",  # reads the step stage's loss curve: tests/steps/test_divergence.py
        "network.stopped_in_nccl_setup",  # where every log stops: tests/rules/test_network.py
        "asymmetry.outlier_lines",  # needs the rank diff: tests/rules/test_asymmetry.py
        "collective.stack_outlier",  # needs the parsed stack dumps: tests/sources/pyspy/test_report.py
        "hardware.out_of_line",  # needs parsed hardware snapshots: tests/rules/test_hardware.py
        "hardware.nccl_tests_stopped",  # needs a parsed nccl-tests run: tests/sources/hw/test_bundles.py
        "meaning.upstream_messages", "meaning.read_by_meaning"}  # tests/rules/test_meaning.py


_SRUN_TAIL = ["srun: error: gpu-node-42: task 11: Killed",
              "srun: Terminating StepId=5700211.0",
              "srun: error: gpu-node-41: tasks 0-7: Aborted (core dumped)",
              "srun: error: gpu-node-42: tasks 8-10,12-15: Aborted (core dumped)"]
_REMOTE = ("{r:2d}: [rank{r}]:[E1105 22:10:03.066635899 ProcessGroupNCCL.cpp:1653] [Rank {r}] Collective WorkNCCL(SeqNum=6671, "
           "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) raised the following async exception: NCCL error: "
           "remote process exited or there was a network error, NCCL version 2.21.5")


def test_srun_killing_one_task_per_gpu_names_that_rank(facts_from):
    """srun launched one task per GPU (eight tasks on one host), so `task 11: Killed` is rank 11's SIGKILL; the
    others' remote errors are what its death did to them."""
    lines = [_REMOTE.format(r=r) for r in (0, 4, 8, 15)] + ["11: [rank11]: step 6671 loss 1.41"] + _SRUN_TAIL
    (c,) = BY_NAME["infra.killed_from_outside"](facts_from({"slurm-5700211.out": lines}))
    assert c.category == "infrastructure" and c.ranks == [11], c.summary


def test_srun_tasks_that_are_node_launchers_name_no_rank(facts_from):
    """One task per host (torchrun under srun): task 1 is the second node's launcher, not rank 1."""
    lines = [_REMOTE.format(r=r) for r in (0, 1, 9)] + ["srun: error: gpu-node-42: task 1: Killed",
                                                          "srun: error: gpu-node-41: task 0: Exited with exit code 1"]
    got = BY_NAME["infra.killed_from_outside"](facts_from({"slurm-5700211.out": lines}))
    assert all(c.ranks != [1] for c in got)


_ASYNC = "dgx-142:4356:4611 [2] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_2:1 Got async event : {}"


@pytest.mark.parametrize("events, strength", [
    (["port error"], 0.8),                        # a fault of the port
    (["local catastrophic error"], 0.8),          # of the device
    (["GID table change"], None),                 # a state change: no fault
    (["port active"], None),
    (["port error", "port active"], 0.45),        # a flap that recovered: named, weakly
])
def test_an_ib_async_event_is_read_by_its_name(facts_from, events, strength):
    got = BY_NAME["network.ib_async"](facts_from({"node1.out": [_ASYNC.format(e) for e in events]}))
    assert (got[0].strength if got else None) == strength


