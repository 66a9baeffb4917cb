"""The synthetic job that eval/synth/generate.py's scenarios write: a SLURM + torchrun + Megatron job whose
ranks print the lines real ones print, exactly in the formats of ../shared/FORMATS.md (c10d, NCCL, torchrun,
Megatron iteration lines, SLURM), into per-node SLURM files as torchrun --tee leaves them.

Why apart from the scenarios: this is how a line looks, generate.py is which lines a failure leaves; a format
fixed here is fixed in every generated case. Seeded: the same seed gives the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

DISCLAIMER = ("This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the "
              "order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. "
              "Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the "
              "communications library (e.g. NCCL), etc. ")


@dataclass
class Job:
    """A SLURM + torchrun + Megatron job: ranks laid out node-major, `ranks_per_node` per node."""

    ranks: int = 8
    ranks_per_node: int = 4
    job_id: int = 4891784
    seed: int = 0
    node_base: int = 17
    files: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self):
        self.rnd = random.Random(self.seed)

    @property
    def nodes(self) -> int:
        return (self.ranks + self.ranks_per_node - 1) // self.ranks_per_node

    def node(self, rank: int) -> str:
        return f"gpu-node-{self.node_base + rank // self.ranks_per_node}"

    def local(self, rank: int) -> int:
        return rank % self.ranks_per_node

    def emit(self, rank: int, text: str) -> None:
        """A worker line as torchrun --tee writes it into the node's SLURM file: `[default3]:...`."""
        name = f"error-{self.job_id}-{rank // self.ranks_per_node}.out"
        self.files.setdefault(name, []).append(f"[default{self.local(rank)}]:{text}")

    def emit_node(self, node_idx: int, text: str) -> None:
        self.files.setdefault(f"error-{self.job_id}-{node_idx}.out", []).append(text)

    # -- building blocks -------------------------------------------------------------------------------------
    def c10(self, rank: int, t: str, src: str, msg: str, sev: str = "E", mmdd: str = "1105") -> None:
        self.emit(rank, f"[rank{rank}]:[{sev}{mmdd} {t}.{self.rnd.randrange(10**9):09d} {src}] {msg}")

    def startup(self) -> None:
        for r in range(self.ranks):
            host, pid, lr = self.node(r), 20000 + r, self.local(r)
            self.emit(r, f"{host}:{pid}:{pid} [{lr}] NCCL INFO NCCL version 2.21.5+cuda12.4")
            self.emit(r, f"{host}:{pid}:{pid + 55} [{lr}] NCCL INFO ncclCommInitRank comm 0x55d0c8a{r:04x} rank {r} "
                         f"nranks {self.ranks} cudaDev {lr} nvmlDev {lr} busId {0x18000 + lr * 0x10000:x} commId "
                         f"0x8c3f2a1b - Init COMPLETE")
        self.emit(self.ranks - 1, f"using world size: {self.ranks}, data-parallel size: {self.ranks}, context-parallel "
                                  f"size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1")

    def training(self, iters: int = 40, start_min: int = 0, ms: float = 7000.0) -> None:
        last = self.ranks - 1
        for it in range(1, iters + 1):
            minute, sec = divmod(start_min * 60 + it * 7, 60)
            self.emit(last, f" [2024-11-05 12:{minute:02d}:{sec:02d}] iteration {it * 10:8d}/   10000 | consumed "
                            f"samples: {it * 2560:12d} | elapsed time per iteration (ms): {ms + self.rnd.random() * 40:.1f}"
                            f" | learning rate: 1.499999E-04 | global batch size:   256 | lm loss: {6.5 - it * 0.02:.6E} |"
                            f" loss scale: 1.0 | grad norm: {1.2 + self.rnd.random():.3f} | number of skipped "
                            f"iterations:   0 | number of nan iterations:   0 |")

    def retry_noise(self, ranks: list[int], minute: int = 2) -> None:
        """Connection resets that succeed on the first retry: noise on healthy ranks."""
        for r in ranks:
            self.emit(r, f"W1105 12:{minute:02d}:{10 + r % 40:02d}.000000 {20000 + r} lhotse/dataset/sampling.py:88] GET "
                         f"ais://train/shard-{r:05d}.tar failed, retrying 1/5: Connection reset by peer")

    def waiting(self, rank: int, seq: int, t: str, op: str = "BROADCAST", pg: str = "0", desc: str = "default_pg",
                enq: int | None = None, comp: int | None = None, timeout_ms: int = 1800000, first: bool = True) -> None:
        """A rank whose own watchdog fired on `seq` (torch ≥2.6 lines)."""
        enq = seq if enq is None else enq
        comp = seq - 1 if comp is None else comp
        pgp = f"[PG ID {pg} PG GUID {pg}({desc}) Rank {rank}]" if desc else f"[PG ID {pg} PG GUID {pg} Rank {rank}]"
        self.c10(rank, t, "ProcessGroupNCCL.cpp:616", f"[Rank {rank}] Watchdog caught collective operation timeout: "
                 f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms}) ran for "
                 f"{timeout_ms + self.rnd.randrange(10, 90)} milliseconds before timing out.")
        self.c10(rank, t, "ProcessGroupNCCL.cpp:2168", f"{pgp}  failure detected by watchdog at work sequence id: {seq} "
                 f"PG status: last enqueued work: {enq}, last completed work: {comp}")
        if first:
            self.c10(rank, t, "ProcessGroupNCCL.cpp:2147", f"{pgp} First PG on this rank to signal dumping.")

    def notified(self, rank: int, t: str, enq: int, comp: int, by: int = 0, pg: str = "0") -> None:
        """A rank that only learned of another rank's timeout (its own watchdog never fired)."""
        pgp = f"[PG ID {pg} PG GUID {pg}(default_pg) Rank {rank}]"
        self.c10(rank, t, "ProcessGroupNCCL.cpp:1710", f"{pgp} Observed flight recorder dump signal from another rank "
                                                      f"via TCPStore.")
        self.c10(rank, t, "ProcessGroupNCCL.cpp:1742", f"{pgp} Received a dump signal due to a collective timeout from  "
                 f"rank {by} and we will try our best to dump the debug info. Last enqueued NCCL work: {enq}, last "
                 f"completed NCCL work: {comp}.{DISCLAIMER}")

    def teardown(self, ranks: list[int], t: str = "12:34:40") -> None:
        for r in ranks:
            self.c10(r, t, "ProcessGroupNCCL.cpp:630", f"[Rank {r}] Some NCCL operations have failed or timed out. Due "
                     f"to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
                     f"corrupted/incomplete data.")
            self.c10(r, t, "ProcessGroupNCCL.cpp:636", f"[Rank {r}] To avoid data inconsistency, we are taking the "
                                                        f"entire process down.")
            self.emit(r, "terminate called after throwing an instance of 'c10::DistBackendError'")

    def launcher_end(self, t: str = "12:34:41") -> None:
        for n in range(self.nodes):
            first = n * self.ranks_per_node
            last = min(first + self.ranks_per_node, self.ranks) - 1
            self.emit_node(n, f"W1105 {t}.000000 {19000 + n} torch/distributed/elastic/multiprocessing/api.py:898] "
                              f"Sending process {20000 + first} closing signal SIGTERM")
            self.emit_node(n, f"srun: error: {self.node(first)}: tasks {first}-{last}: Exited with exit code 1")

    def truth(self, category: str, culprits: list[int], root_cause: str, evidence: list[str], tags: list[str],
              first_failure: str | None = None, nodes: list[str] | None = None, title: str = "") -> dict:
        t = {"category": category, "culprit_ranks": culprits,
             "culprit_nodes": nodes if nodes is not None else sorted({self.node(r) for r in culprits}),
             "root_cause": root_cause, "evidence": evidence}
        if first_failure:
            t["first_failure_time"] = first_failure
        t.update({"tags": tags + ["generated"], "title": f"generated: {title}", "framework": "Megatron-LM + torchrun + SLURM",
                  "scale": f"{self.ranks} ranks on {self.nodes} nodes", "confidence": "high",
                  "source_url": "generated by eval/synth/generate.py"})
        return t
