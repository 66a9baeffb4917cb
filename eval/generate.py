"""Seeded generator of synthetic incident cases, lines exactly in the formats of ../shared/FORMATS.md.

Why generated cases: real bundles are rare, partial and cannot be shared at 1024 ranks. A generator lets us put
the culprit at rank 0, 1, the middle or the last rank, at 8, 128 or 1024 ranks, with the noise real jobs have
(NCCL INFO chatter, recovering retries, warnings on healthy ranks), and know the truth exactly.

Run: `python -m eval.generate cases/` (regenerates every case; same seed, same bytes).
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml


@dataclass
class Job:
    """A SLURM + torchrun + Megatron job: ranks laid out node-major, `ranks_per_node` per node."""

    ranks: int = 8
    ranks_per_node: int = 4
    job_id: int = 4891784
    seed: int = 0
    node_prefix: str = "gpu-node-"
    node_base: int = 17
    files: dict[str, list[str]] = field(default_factory=dict)

    def node(self, rank: int) -> str:
        return f"{self.node_prefix}{self.node_base + rank // self.ranks_per_node}"

    def local(self, rank: int) -> int:
        return rank % self.ranks_per_node

    def file(self, rank: int) -> str:
        return f"error-{self.job_id}-{rank // self.ranks_per_node}.out"

    def emit(self, rank: int, text: str, tee: bool = True) -> None:
        """A worker line as torchrun --tee writes it into the node's SLURM file: `[default3]:[rank3]:...`."""
        prefix = f"[default{self.local(rank)}]:" if tee else ""
        self.files.setdefault(self.file(rank), []).append(prefix + text)

    def emit_node(self, node_idx: int, text: str) -> None:
        self.files.setdefault(f"error-{self.job_id}-{node_idx}.out", []).append(text)


def _c10(rank: int, sev: str, mmdd: str, t: str, ns: int, src: str, msg: str) -> str:
    return f"[rank{rank}]:[{sev}{mmdd} {t}.{ns:09d} {src}] {msg}"


def _pg(rank: int) -> str:
    return f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"


def data_loading_straggler(ranks: int = 8, culprit: int = 5, seed: int = 0) -> tuple[Job, dict]:
    """One rank hangs in its data loader (retries escalate, then silence); 30 min later every other rank's
    watchdog fires on the per-step BROADCAST and the launcher takes the job down."""
    rnd = random.Random(seed)
    job = Job(ranks=ranks, ranks_per_node=min(8, max(1, ranks // 2)), seed=seed)
    seq_stuck = 4521
    for r in range(ranks):
        host = job.node(r)
        pid = 20000 + r
        job.emit(r, f"{host}:{pid}:{pid} [{job.local(r)}] NCCL INFO NCCL version 2.21.5+cuda12.4")
        job.emit(r, f"{host}:{pid}:{pid + 55} [{job.local(r)}] NCCL INFO ncclCommInitRank comm 0x55d0c8a{r:04x} rank {r} "
                    f"nranks {ranks} cudaDev {job.local(r)} nvmlDev {job.local(r)} busId {0x18000 + job.local(r) * 0x10000:x} "
                    f"commId 0x8c3f2a1b - Init COMPLETE")
    last = ranks - 1
    job.emit(last, f"using world size: {ranks}, data-parallel size: {ranks}, context-parallel size: 1, "
                   f"tensor-model-parallel size: 1, pipeline-model-parallel size: 1")
    for it in range(1, 41):
        minute, sec = divmod(it * 7, 60)
        ts = f"2024-11-05 12:{minute:02d}:{sec:02d}"
        ms = 7000 + rnd.random() * 40
        job.emit(last, f" [{ts}] iteration {it * 10:8d}/   10000 | consumed samples: {it * 2560:12d} | elapsed time per "
                       f"iteration (ms): {ms:.1f} | learning rate: 1.499999E-04 | global batch size:   256 | lm loss: "
                       f"{6.5 - it * 0.02:.6E} | loss scale: 1.0 | grad norm: {1.2 + rnd.random():.3f} | number of skipped "
                       f"iterations:   0 | number of nan iterations:   0 |", tee=True)
    noisy = [r for r in range(ranks) if r != culprit][: max(1, ranks // 8)]
    for r in noisy:
        job.emit(r, f"W1105 12:02:{10 + r % 40:02d}.000000 {20000 + r} lhotse/dataset/sampling.py:88] GET "
                    f"ais://train/shard-{r:05d}.tar failed, retrying 1/5: Connection reset by peer")
    for k in range(1, 6):
        job.emit(culprit, f"W1105 12:04:{k * 9:02d}.000000 {20000 + culprit} lhotse/dataset/sampling.py:88] GET "
                          f"ais://train/shard-{culprit:05d}.tar failed, retrying {k}/5: Read timed out. (read timeout=60)")
    job.emit(culprit, f"I1105 12:04:58.000000 {20000 + culprit} lhotse/dataset/sampling.py:95] opening "
                      f"ais://train/shard-{culprit:05d}.tar (attempt 6, no timeout)")
    for r in range(ranks):
        if r == culprit:
            continue
        t = f"12:34:{10 + r % 40:02d}"
        job.emit(r, _c10(r, "E", "1105", t, 100000000 + r, "ProcessGroupNCCL.cpp:616",
                         f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq_stuck}, "
                         f"OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for {1800000 + 12 + r} "
                         f"milliseconds before timing out."))
        job.emit(r, _c10(r, "E", "1105", t, 200000000 + r, "ProcessGroupNCCL.cpp:2168",
                         f"{_pg(r)}  failure detected by watchdog at work sequence id: {seq_stuck} PG status: last "
                         f"enqueued work: {seq_stuck}, last completed work: {seq_stuck - 1}"))
        job.emit(r, _c10(r, "E", "1105", t, 300000000 + r, "ProcessGroupNCCL.cpp:2147",
                         f"{_pg(r)} First PG on this rank to signal dumping."))
    t = "12:34:12"
    job.emit(culprit, _c10(culprit, "E", "1105", t, 400000000, "ProcessGroupNCCL.cpp:1710",
                           f"{_pg(culprit)} Observed flight recorder dump signal from another rank via TCPStore."))
    job.emit(culprit, _c10(culprit, "E", "1105", t, 500000000, "ProcessGroupNCCL.cpp:1742",
                           f"{_pg(culprit)} Received a dump signal due to a collective timeout from  rank 0 and we will "
                           f"try our best to dump the debug info. Last enqueued NCCL work: {seq_stuck - 1}, last completed "
                           f"NCCL work: {seq_stuck - 1}.This is most likely caused by incorrect usages of collectives, "
                           f"e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or "
                           f"the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL "
                           f"deadlock or other reasons such as network errors or bugs in the communications library (e.g. "
                           f"NCCL), etc. "))
    for r in range(ranks):
        if r == culprit:
            continue
        job.emit(r, _c10(r, "E", "1105", "12:34:40", 600000000 + r, "ProcessGroupNCCL.cpp:630",
                         f"[Rank {r}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
                         f"CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."))
        job.emit(r, _c10(r, "E", "1105", "12:34:40", 700000000 + r, "ProcessGroupNCCL.cpp:636",
                         f"[Rank {r}] To avoid data inconsistency, we are taking the entire process down."))
        job.emit(r, "terminate called after throwing an instance of 'c10::DistBackendError'")
    nodes = (ranks + job.ranks_per_node - 1) // job.ranks_per_node
    for n in range(nodes):
        first = n * job.ranks_per_node
        job.emit_node(n, f"W1105 12:34:41.000000 {19000 + n} torch/distributed/elastic/multiprocessing/api.py:898] "
                         f"Sending process {20000 + first} closing signal SIGTERM")
        job.emit_node(n, f"srun: error: {job.node(first)}: tasks {first}-{min(first + job.ranks_per_node, ranks) - 1}: "
                         f"Exited with exit code 1")
    truth = {
        "category": "data_loading_stall", "culprit_ranks": [culprit], "culprit_nodes": [job.node(culprit)],
        "root_cause": f"Rank {culprit}'s data loader stalled on a storage read (retries escalated to 5/5, then an "
                      f"untimed read); it never joined BROADCAST SeqNum={seq_stuck}, and 30 minutes later every other "
                      f"rank's NCCL watchdog fired and the job was torn down.",
        "evidence": [f"retrying 5/5 on rank {culprit}",
                     f"rank {culprit}: Last enqueued NCCL work: {seq_stuck - 1}, last completed NCCL work: {seq_stuck - 1}"],
        "first_failure_time": "2024-11-05T12:04:45", "tags": ["hang", "cross-rank", "generated"],
        "title": f"generated: data-loading straggler, {ranks} ranks", "framework": "Megatron-LM + torchrun + SLURM",
        "scale": f"{ranks} ranks on {nodes} nodes", "confidence": "high", "source_url": "generated by eval/generate.py",
    }
    return job, truth


SCENARIOS = {
    "gen-slurm-8r-a": lambda: data_loading_straggler(ranks=8, culprit=5, seed=1),
}


def write_case(dest: Path, job: Job, truth: dict) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name, lines in job.files.items():
        (dest / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (dest / "truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False, width=100), encoding="utf-8")


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "cases")
    for slug, make in SCENARIOS.items():
        job, truth = make()
        write_case(out / slug, job, truth)
        print(f"wrote {out / slug} ({len(job.files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
