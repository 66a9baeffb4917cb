"""The lab's runs as data: each torchrun job eval/lab/run_lab.py starts, the fault it injects, and the truth.yaml
written for it (category, root cause, the evidence lines that must appear in the run's own files).

Why apart from run_lab.py: adding or changing a run is editing this table only; run_lab.py launches a Run, watches
it and writes its case, whatever the run is. Letters in the slugs are assigned so that a slug says nothing about
the fault. Plain Python with no import from the project: run_lab.py runs from the lab's own venv (torch, no
trainlog_debugger), by path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TRAIN = "eval/lab/train.py"
TRAIN_LIGHTNING = "eval/lab/train_lightning.py"
TRAIN_HF = "eval/lab/train_hf.py"


@dataclass
class Run:
    slug: str
    nproc: int
    fault: str
    rank: int = -1  # the culprit rank (-1: none / every rank)
    step: int = 10
    stdio: str = "tee"  # tee: workers' lines on the console and in --log-dir; redirects: only in --log-dir
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    job_id: int = 0
    limit_s: int = 150
    # truth
    category: str = ""
    root_cause: str = ""
    evidence: list[tuple[str, str]] = field(default_factory=list)  # (file glob relative to the case, regex)
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    title: str = ""
    timed: bool = True  # first_failure_time: the last timestamped line of the culprit (or of rank 0)
    script: str = TRAIN  # the worker program torchrun starts
    framework: str = "torch 2.13.0 CPU, gloo, torchrun"
    # launch shape (defaults: one torchrun agent, c10d rendezvous, as the first runs)
    nnodes: int = 1  # --nnodes; with more than 1, each agent's files go to node<i>/ (torchrun.out, logs/)
    agents: int | None = None  # how many agents are started (default nnodes; fewer: a node that never comes up)
    rdzv: str = "c10d"  # c10d: --rdzv-endpoint; static: --master-addr/--master-port/--node-rank
    rdzv_conf: str = ""  # --rdzv-conf
    rdzv_ids: list[int] = field(default_factory=list)  # per agent, where they differ (default: job_id for all)
    fft_rx: str = ""  # first_failure_time: the culprit's first line matching this (default: its last timed line)
    setup: str = ""  # "volume:<KiB>": a small tmpfs for --out; "dir": a plain dir for --out; "port-taken"

    def nproc_node(self) -> int:
        return self.nproc // self.nnodes

    def rank_glob(self, rank: int, name: str = "stderr.log") -> str:
        """The --log-dir file of global rank `rank` (ranks fill node 0 first, as static rendezvous assigns them)."""
        node, local = divmod(rank, self.nproc_node())
        pre = f"node{node}/" if self.nnodes > 1 else ""
        return f"{pre}logs/*/attempt_0/{local}/{name}"


KILL_NOTE = ("Category infrastructure: the rank's own log has no error at all, only the launcher's "
             "'Signal 9 (SIGKILL)' with exitcode -9. A SIGKILL comes from outside the process (the kernel OOM killer, "
             "a cgroup limit, an operator or a health checker), so an SRE files it as infrastructure with the rank "
             "as culprit; the lab "
             "injected it with os.kill(os.getpid(), SIGKILL), which leaves the same trace. Without dmesg/cgroup logs "
             "the bundle cannot tell the OOM killer from an operator.")


LIGHTNING = "torch 2.13.0 CPU, lightning 2.6.6, DDP over gloo, torchrun"
HF = "torch 2.13.0 CPU, transformers 5.23.0 Trainer (accelerate 1.15.0), DDP over gloo, torchrun"
TWO_NODE = "torch 2.13.0 CPU, gloo, two torchrun agents (--nnodes 2)"


def plan() -> list[Run]:
    """The runs. Letters are assigned so that a slug says nothing about the fault."""
    detail = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
    info = {"LOGLEVEL": "INFO"}  # torchrun's own INFO lines: launch config, rendezvous progress
    stacks = ["--dump-stacks-on-sigterm"]
    return [
        Run("lab-gloo4-a", 4, "raise", rank=3, step=12, job_id=73101, category="software",
            root_cause="Rank 3 crashed at step 12 with a shape bug (a feature-dropping code path fed the model 28 "
                       "features instead of 32: mat1 and mat2 shapes cannot be multiplied); the other ranks lost "
                       "their gloo peer in the gradient all-reduce and the launcher stopped the job.",
            evidence=[("logs/*/attempt_0/3/stderr.log", r"RuntimeError: mat1 and mat2 shapes cannot be multiplied")],
            tags=["crash", "cross-rank"], title="one rank raises a RuntimeError (4 ranks, torchrun --tee)"),
        Run("lab-gloo4-b", 4, "stall", rank=2, step=12, args=stacks, job_id=73102, category="data_loading_stall",
            root_cause="Rank 2 blocked forever inside its Dataset.__getitem__ (a read that never returns) at step 12; "
                       "the other ranks waited in DDP's gradient all-reduce until the 20 s gloo timeout raised, and "
                       "the launcher then stopped rank 2 with SIGTERM (its faulthandler stack shows the read).",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"Timed out waiting \d+ms for (recv|send)"),
                      ("logs/*/attempt_0/2/stderr.log", r"step 11 loss"),
                      ("logs/*/attempt_0/2/stderr.log", r"in _read"),
                      ("logs/*/attempt_0/2/stderr.log", r"in __getitem__")],
            tags=["hang", "cross-rank"],
            notes="The launcher's 'Root Cause (first observed failure)' names a rank that timed out waiting, not "
                  "rank 2: rank 2 never failed on its own, it was stopped by the launcher (SIGTERM). Every rank's "
                  "last step line is step 11; every rank but 2 then has a gloo 'Timed out waiting 20000ms' traceback "
                  "from the step-12 backward, and rank 2 has none: its faulthandler stack (dumped on SIGTERM) is in "
                  "Dataset.__getitem__.",
            title="one rank stalls in its data loader (4 ranks, stacks dumped on SIGTERM)"),
        Run("lab-gloo4-c", 4, "none", job_id=73103, category="none",
            root_cause="The job finished normally (30 steps on 4 ranks).",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"training finished")],
            tags=["control"], title="clean run (4 ranks)"),
        Run("lab-gloo4-d", 4, "oom", rank=2, step=8, job_id=73104, category="oom",
            root_cause="Rank 2 leaked host memory (every step's outputs kept in a cache, +256 MiB a step) from step 8 "
                       "until the CPU allocator could not allocate more (its address space was capped); it raised "
                       "'DefaultCPUAllocator: can't allocate memory' and the others lost their gloo peer.",
            evidence=[("logs/*/attempt_0/2/stderr.log", r"DefaultCPUAllocator: can't allocate memory"),
                      ("logs/*/attempt_0/2/stderr.log", r"rss_mb (1[0-9]{3}|[2-9][0-9]{3})")],
            tags=["crash", "cross-rank", "host-memory"],
            notes="Host (CPU) memory, not GPU memory: the limit is an RLIMIT_AS cap set only in rank 2 (current "
                  "size + 1 GiB) so that the machine stays safe; a real job would hit the cgroup or the OOM killer "
                  "instead. The rss_mb field of rank 2's step lines grows by 256 MiB a step before the failure.",
            title="one rank runs out of host memory (4 ranks)"),
        Run("lab-gloo4-e", 4, "kill", rank=1, step=14, job_id=73105, category="infrastructure",
            root_cause="Rank 1 was killed by SIGKILL at step 14 (exitcode -9, no error in its own log); the other "
                       "ranks lost their gloo peer and the launcher stopped the job.",
            evidence=[("torchrun.out", r"Signal 9 \(SIGKILL\) received by PID"),
                      ("torchrun.out", r"exitcode\s+: -9"),
                      ("logs/*/attempt_0/1/stderr.log", r"step 13 loss")],
            tags=["crash", "cross-rank", "signal"], notes=KILL_NOTE,
            title="one rank is SIGKILLed (4 ranks)"),
        Run("lab-gloo4-f", 4, "skip_collective", rank=1, step=10, env=detail, args=["--grad-sync", "manual"],
            job_id=73106, category="software",
            root_cause="Rank 1 skipped the per-step loss all_reduce at step 10 that every other rank ran, so its next "
                       "collective (the first gradient all_reduce) did not match the others'; with "
                       "TORCH_DISTRIBUTED_DEBUG=DETAIL the process-group wrapper reported the mismatch.",
            evidence=[("logs/*/attempt_0/*/stderr.log", r"[Mm]ismatch")],
            tags=["crash", "cross-rank", "collective-mismatch"],
            notes="Gradients are averaged by hand (one all_reduce per parameter, no DDP): with DDP, "
                  "TORCH_DISTRIBUTED_DEBUG=DETAIL crashes torch 2.13.0+cpu at DDP construction (see the case of job "
                  "73117).",
            title="one rank skips a collective, DETAIL debug on (4 ranks)"),
        Run("lab-gloo4-g", 4, "nan", step=9, job_id=73107, category="numerical",
            root_cause="The learning rate jumped by 1e8 at step 9 (a scheduler bug) on every rank; the next losses "
                       "were NaN/inf and every rank's loss check raised FloatingPointError.",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"FloatingPointError: Loss became infinite or NaN"),
                      ("logs/*/attempt_0/0/stderr.log", r"lr 5e\+06")],
            tags=["crash", "all-ranks"],
            notes="No culprit rank: DDP keeps the replicas identical, so every rank diverges at the same iteration.",
            title="loss diverges to NaN (4 ranks)"),
        Run("lab-gloo4-h", 4, "none", env=detail, job_id=73117, category="software",
            root_cause="Every rank died with SIGSEGV inside DistributedDataParallel's constructor "
                       "(Logger.set_construction_data_and_log) because TORCH_DISTRIBUTED_DEBUG=DETAIL was set: a "
                       "crash in torch 2.13.0+cpu itself, before the first training step.",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"Fatal Python error: Segmentation fault"),
                      ("logs/*/attempt_0/0/stderr.log", r"in _ddp_init_helper"),
                      ("torchrun.out", r"exitcode\s+: -11")],
            tags=["crash", "all-ranks", "startup"], timed=False,
            notes="Not an injected fault: this is the lab's intended DETAIL-debug run with DDP, which crashed the "
                  "same way on every attempt (also at world size 1, outside torchrun; TORCH_DISTRIBUTED_DEBUG=INFO "
                  "does not crash). Category software (a framework bug), triggered by a debug setting; no culprit "
                  "rank, every rank crashes at the same point.",
            title="every rank segfaults in the DDP constructor with DETAIL debug (4 ranks)"),
        Run("lab-gloo8-a", 8, "skip_collective", rank=3, step=10, job_id=73111, category="software",
            root_cause="Rank 3 skipped the per-step loss all_reduce at step 10 that every other rank ran; its next "
                       "collective (DDP's gradient all-reduce) met the others' 1-element loss all-reduce and gloo "
                       "aborted on the size mismatch.",
            evidence=[("logs/*/attempt_0/*/stderr.log", r"collective mismatch in your code"),
                      ("logs/*/attempt_0/3/stderr.log", r"step 10 loss")],
            tags=["crash", "cross-rank", "collective-mismatch"],
            notes="The gloo size check aborted a peer of rank 3 (terminate called after throwing "
                  "'gloo::EnforceNotMet' ... 'Is there a distributed collective mismatch in your code?', SIGABRT); "
                  "the launcher's 'Root Cause (first observed failure)' names a peer (the aborted one or one that "
                  "lost its connection to it), never rank 3. Rank 3 is the only rank that logged step 10: it "
                  "skipped the step-10 loss all-reduce and ran ahead.",
            title="one rank skips a collective (8 ranks)"),
        Run("lab-gloo8-b", 8, "oom", rank=7, step=6, stdio="redirects", job_id=73112, category="oom",
            root_cause="Rank 7 leaked host memory (+256 MiB a step from step 6) until the CPU allocator failed "
                       "('DefaultCPUAllocator: can't allocate memory'); the other ranks lost their gloo peer.",
            evidence=[("logs/*/attempt_0/7/stderr.log", r"DefaultCPUAllocator: can't allocate memory")],
            tags=["crash", "cross-rank", "host-memory"],
            notes="Workers' output only in --log-dir (torchrun --redirects 3); torchrun.out holds the launcher's "
                  "lines. Host memory capped by RLIMIT_AS in rank 7 only.",
            title="one rank runs out of host memory (8 ranks, --redirects)"),
        Run("lab-gloo8-c", 8, "stall", rank=5, step=9, args=["--workers", "2"], stdio="redirects", job_id=73113,
            category="data_loading_stall",
            root_cause="Rank 5's DataLoader worker blocked forever in Dataset.__getitem__ at step 9, so rank 5 never "
                       "reached the gradient all-reduce; the other ranks timed out in gloo after 20 s and the launcher "
                       "stopped rank 5.",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"Timed out waiting \d+ms for (recv|send)"),
                      ("logs/*/attempt_0/5/stderr.log", r"step 8 loss")],
            tags=["hang", "cross-rank"],
            notes="No stack dump: every rank's last step line is step 8; every rank but 5 then has a gloo 'Timed "
                  "out waiting 20000ms' traceback from the step-9 backward, and rank 5's log simply stops (the "
                  "launcher stopped it with SIGTERM, 'Signal 15'). The launcher's 'Root Cause (first observed "
                  "failure)' names a waiting rank.",
            title="one rank stalls in its data loader (8 ranks, 2 loader workers, --redirects)"),
        Run("lab-gloo8-d", 8, "kill", rank=6, step=11, job_id=73114, category="infrastructure",
            root_cause="Rank 6 was killed by SIGKILL at step 11 (exitcode -9, no error in its own log); the other "
                       "ranks lost their gloo peer and the launcher stopped the job.",
            evidence=[("torchrun.out", r"Signal 9 \(SIGKILL\) received by PID"),
                      ("logs/*/attempt_0/6/stderr.log", r"step 10 loss")],
            tags=["crash", "cross-rank", "signal"], notes=KILL_NOTE, title="one rank is SIGKILLed (8 ranks)"),
        Run("lab-gloo8-e", 8, "none", job_id=73115, category="none",
            root_cause="The job finished normally (30 steps on 8 ranks).",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"training finished")],
            tags=["control"], title="clean run (8 ranks)"),
        Run("lab-lightning4-a", 4, "corrupt", rank=2, step=3, job_id=73121, category="data", script=TRAIN_LIGHTNING,
            framework=LIGHTNING,
            root_cause="Rank 2's dataset read a truncated JSON record (a partially written shard) at step 3: "
                       "json.loads raised inside Dataset.__getitem__ in a DataLoader worker and PyTorch re-raised it "
                       "in the trainer as 'Caught JSONDecodeError in DataLoader worker process N'; the other ranks "
                       "lost their peer and the launcher stopped the job.",
            evidence=[("logs/*/attempt_0/2/stderr.log", r"Caught JSONDecodeError in DataLoader worker process"),
                      ("logs/*/attempt_0/2/stderr.log", r"in __getitem__")],
            tags=["crash", "cross-rank", "lightning"], title="one rank reads a corrupt record (Lightning, 4 ranks)"),
        Run("lab-lightning4-b", 4, "nan", step=10, job_id=73122, category="numerical", script=TRAIN_LIGHTNING,
            framework=LIGHTNING,
            root_cause="The learning rate jumped by 1e8 at step 10 on every rank; the loss became NaN and Lightning's "
                       "EarlyStopping(check_finite=True) stopped the run at the end of the epoch.",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"is not finite")],
            tags=["all-ranks", "lightning"], timed=False,
            notes="Lightning stops the run itself: every process exits 0 after the NaN, so only the EarlyStopping "
                  "line says that the run did not reach max_steps.",
            title="loss diverges, EarlyStopping stops the run (Lightning, 4 ranks)"),
        Run("lab-lightning4-c", 4, "none", job_id=73123, category="none", script=TRAIN_LIGHTNING, framework=LIGHTNING,
            root_cause="The job finished normally (Lightning: `Trainer.fit` stopped: `max_steps=30` reached).",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"Trainer.fit. stopped")],
            tags=["control", "lightning"], title="clean run (Lightning, 4 ranks)"),
        Run("lab-gloo8-f", 8, "raise", rank=0, step=7, job_id=73116, category="software",
            root_cause="Rank 0 crashed at step 7 with a shape bug (mat1 and mat2 shapes cannot be multiplied); the "
                       "other ranks lost their gloo peer and the launcher stopped the job.",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"RuntimeError: mat1 and mat2 shapes cannot be multiplied")],
            tags=["crash", "cross-rank"], title="rank 0 raises a RuntimeError (8 ranks)"),
        # --- HF transformers.Trainer (over Accelerate), DDP over gloo under torchrun ---
        Run("lab-hf4-a", 4, "none", rank=0, job_id=73131, category="storage_io", script=TRAIN_HF, framework=HF,
            setup="volume:1152", timed=False,
            root_cause="The checkpoint volume filled up: the Trainer's second checkpoint (checkpoint-20) could not "
                       "be written, rank 0's model.safetensors write failed with ENOSPC (No space left on device) and "
                       "rank 0 raised out of trainer.train(); the other ranks lost their gloo peer.",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"No space left on device"),
                      ("logs/*/attempt_0/0/stderr.log", r"Saving model checkpoint to .*checkpoint-20")],
            tags=["crash", "cross-rank", "checkpoint", "hf-trainer"],
            notes="The output dir was a 1152 KiB tmpfs of its own (a real filesystem that fills up): checkpoint-10 "
                  "(~1 MB) fit, checkpoint-20 did not. Only rank 0 writes the model and optimizer files (every rank "
                  "writes its rng_state_<rank>.pth). The Trainer's own lines carry no timestamps.",
            title="checkpoint write fails, disk full (HF Trainer, 4 ranks)"),
        Run("lab-hf4-b", 4, "none", job_id=73132, category="none", script=TRAIN_HF, framework=HF, setup="dir",
            root_cause="The job finished normally (HF Trainer: 30 steps, checkpoints at 10, 20, 30, final "
                       "train_runtime summary).",
            evidence=[("logs/*/attempt_0/0/stdout.log", r"'train_runtime'"),
                      ("logs/*/attempt_0/0/stderr.log", r"training finished")],
            tags=["control", "hf-trainer"], title="clean run (HF Trainer, 4 ranks)"),
        Run("lab-lightning4-d", 4, "corrupt_image", rank=1, step=5, stdio="redirects", job_id=73124,
            category="data", script=TRAIN_LIGHTNING, framework=LIGHTNING,
            root_cause="Rank 1's dataset decoded a truncated PNG record at step 5 (a partially written image): "
                       "Pillow raised 'image file is truncated' inside Dataset.__getitem__ in a DataLoader worker, "
                       "PyTorch re-raised it in the trainer ('Caught OSError in DataLoader worker process N'); the "
                       "other ranks lost their peer and the launcher stopped the job.",
            evidence=[("logs/*/attempt_0/1/stderr.log", r"Caught OSError in DataLoader worker process"),
                      ("logs/*/attempt_0/1/stderr.log", r"image file is truncated")],
            tags=["crash", "cross-rank", "lightning"], timed=False,
            notes="Workers' output only in --log-dir (torchrun --redirects 3). OSError here is a decode error of "
                  "the record's content, not an I/O error of the storage: category data.",
            title="one rank decodes a truncated image (Lightning, 4 ranks, --redirects)"),
        Run("lab-lightning4-e", 4, "nan_anomaly", step=10, job_id=73125, category="numerical", script=TRAIN_LIGHTNING,
            framework=LIGHTNING, timed=False,
            root_cause="The learning rate jumped by 1e8 at step 10 on every rank; the weights overflowed and with "
                       "Trainer(detect_anomaly=True) autograd's anomaly mode raised in the backward pass "
                       "('returned nan values') on every rank.",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"returned nan values")],
            tags=["crash", "all-ranks", "lightning"],
            notes="No culprit rank: DDP keeps the replicas identical, every rank diverges at the same step.",
            title="loss diverges, anomaly detection raises (Lightning, 4 ranks)"),
        # --- two torchrun agents ("nodes") on one machine, each with its own console file and --log-dir ---
        Run("lab-2node-a", 4, "kill", rank=3, step=12, nnodes=2, rdzv="static", job_id=73141,
            category="infrastructure", framework=TWO_NODE,
            root_cause="Rank 3 (node rank 1, local rank 1) was killed by SIGKILL at step 12 (exitcode -9, no error "
                       "in its own log); the other ranks, on both nodes, lost their gloo peer and both agents "
                       "stopped their workers.",
            evidence=[("node1/torchrun.out", r"Signal 9 \(SIGKILL\) received by PID"),
                      ("node1/torchrun.out", r"exitcode\s+: -9"),
                      ("node1/logs/*/attempt_0/1/stderr.log", r"step 11 loss")],
            tags=["crash", "cross-rank", "signal", "multi-node"], notes=KILL_NOTE + " Both agents ran on one "
            "machine (every report says host: localhost), so no node name is given: the node is node rank 1 "
            "(files under node1/, ranks 2-3).",
            title="one rank on the second node is SIGKILLed (2 agents x 2 ranks)"),
        Run("lab-2node-b", 4, "raise", rank=2, step=9, nnodes=2, rdzv="static", job_id=73142, category="software",
            framework=TWO_NODE,
            root_cause="Rank 2 (node rank 1, local rank 0) crashed at step 9 with a shape bug (mat1 and mat2 shapes "
                       "cannot be multiplied); the other ranks lost their gloo peer and both agents stopped.",
            evidence=[("node1/logs/*/attempt_0/0/stderr.log", r"RuntimeError: mat1 and mat2 shapes cannot be multiplied")],
            tags=["crash", "cross-rank", "multi-node"],
            notes="Both agents ran on one machine (host: localhost in every report): the culprit's node is node rank "
                  "1 (files under node1/).",
            title="one rank on the second node raises (2 agents x 2 ranks)"),
        Run("lab-2node-c", 4, "none", nnodes=2, agents=1, rdzv_conf="join_timeout=20", job_id=73143, env=info,
            category="infrastructure", framework=TWO_NODE, timed=False, limit_s=90,
            root_cause="The job asked for 2 nodes (--nnodes 2, c10d rendezvous) but the second node's agent never "
                       "started; the one agent that ran waited for its peer until the 20 s rendezvous join timeout "
                       "and raised RendezvousTimeoutError. No worker ever started.",
            evidence=[("node0/torchrun.out", r"max_nodes\s*:\s*2"),
                      ("node0/torchrun.out", r"api\.RendezvousTimeoutError")],
            tags=["startup", "rendezvous", "multi-node"],
            notes="Only node0/ exists: the second agent was never launched (a node that never came up, or whose "
                  "launcher never ran), which is infrastructure. The same console with wrong rendezvous settings "
                  "on the other node (see the case of job 73144) would be config; this bundle alone cannot tell "
                  "them apart, the truth is what the run did.",
            title="the second node never joins the rendezvous (1 of 2 agents started)"),
        Run("lab-2node-d", 4, "none", nnodes=2, rdzv_conf="join_timeout=20", rdzv_ids=[73144, 73145], job_id=73144,
            env=info,
            category="config", framework=TWO_NODE, timed=False, limit_s=90,
            root_cause="The two agents were launched with different rendezvous ids (--rdzv-id 73144 on node 0, 73145 "
                       "on node 1) on the same endpoint, so each waited alone for a second node in its own "
                       "rendezvous until the 20 s join timeout: wrong rendezvous settings, both nodes were up.",
            evidence=[("node0/torchrun.out", r"run_id\s*:\s*73144"),
                      ("node1/torchrun.out", r"run_id\s*:\s*73145"),
                      ("node0/torchrun.out", r"api\.RendezvousTimeoutError"),
                      ("node1/torchrun.out", r"api\.Rendezvous(Connection|Timeout)Error")],
            tags=["startup", "rendezvous", "multi-node"],
            notes="LOGLEVEL=INFO makes each agent print its launch config (run_id, rdzv_endpoint, min/max "
                  "nodes): the run ids differ between node0/ and node1/. Node 0's agent hosted the c10d store and "
                  "timed out first; node 1's agent then lost the store (RendezvousConnectionError) instead of "
                  "timing out itself.",
            title="two agents with different rendezvous ids time out (2 agents)"),
        # --- fault families of their own, plain torchrun + train.py ---
        Run("lab-gloo4-i", 4, "nofile", rank=1, step=6, job_id=73151, category="config",
            root_cause="Rank 1 ran with a low open-files limit (RLIMIT_NOFILE) while the dataset keeps every shard "
                       "file it has read open; after a few steps its next open() failed with EMFILE (Too many open "
                       "files) inside Dataset.__getitem__, and the other ranks lost their gloo peer.",
            evidence=[("logs/*/attempt_0/1/stderr.log", r"Too many open files")],
            tags=["crash", "cross-rank", "ulimit"],
            notes="The limit was set by rank 1 itself right after start-up (in-use fds + 16 x 6), standing for a "
                  "node whose `ulimit -n` is lower than the others'; the other ranks keep the machine's limit "
                  "(20000) and open the same number of shard files without trouble. Category config (a limit "
                  "setting), not data: no record is bad, and not software: the design fits the usual limit.",
            title="one rank hits its open-files limit (4 ranks)"),
        Run("lab-gloo4-j", 4, "none", rdzv="static", setup="port-taken", job_id=73152, category="config",
            timed=False, limit_s=90,
            root_cause="The master port given to torchrun was already in use by another program on the node "
                       "(EADDRINUSE), so the launcher could not start its TCP store and no worker ever ran.",
            evidence=[("torchrun.out", r"(?i)address already in use")],
            tags=["startup", "port"],
            notes="run_lab.py held the port with a listening socket for the whole run (as a previous job or "
                  "another user's process would); torchrun's static rendezvous (--master-port) binds it.",
            title="the master port is already in use (4 ranks)"),
        Run("lab-gloo4-k", 4, "slow_eval", rank=0, step=10, job_id=73153, category="software",
            fft_rx="running validation",
            root_cause="Rank 0 alone ran a validation pass at step 10 (200 batches, ~30 s), after its optimizer step "
                       "and before the step's loss all-reduce; the other ranks waited in that all-reduce until the "
                       "20 s gloo timeout raised, and the launcher stopped rank 0 (SIGTERM) still inside its "
                       "validation loop (last line: validation batch 120/200).",
            evidence=[("logs/*/attempt_0/0/stderr.log", r"running validation: 200 batches"),
                      ("logs/*/attempt_0/1/stderr.log", r"Timed out waiting \d+ms for (recv|send)")],
            tags=["hang", "cross-rank", "asymmetric-work"],
            notes="TAXONOMY edge case: one rank busy longer than the collective timeout with evaluation only it "
                  "runs is software (asymmetric work), not data_loading_stall and not a fabric hang. Rank 0's last "
                  "lines are its 'validation batch N/200' progress lines.",
            title="rank 0 alone runs a long validation, the others time out (4 ranks)"),
    ]
