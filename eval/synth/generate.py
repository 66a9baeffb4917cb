"""Seeded generator of synthetic incident cases, lines exactly in the formats of ../shared/FORMATS.md.

Why generated cases: real bundles are rare, partial and cannot be shared at 1024 ranks. A generator lets us put
the culprit at rank 0, 1, the middle or the last rank, at 8, 128 or 1024 ranks, with the noise real jobs have
(NCCL INFO chatter, recovering retries, warnings on healthy ranks), and know the truth exactly.

Each scenario below drives a Job (eval/synth/job.py: the line formats) through a failure and returns it with its
truth. Layout: SLURM per-node files `error-<job>-<n>.out` holding torchrun --tee output (`[default3]:[rank11]:...`).
Run: `python -m trainlog_debugger.eval.synth.generate cases/` (regenerates every case; same seed, same bytes).
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import yaml

from trainlog_debugger.eval.synth.job import Job


def _job(ranks: int, seed: int) -> Job:
    job = Job(ranks=ranks, ranks_per_node=min(8, max(1, ranks // 2)), seed=seed)
    job.startup()
    job.training()
    job.retry_noise([r for r in range(0, ranks, max(1, ranks // 4))][:4])
    return job


def data_loading_straggler(ranks: int = 8, culprit: int = 5, seed: int = 0) -> tuple[Job, dict]:
    """One rank hangs in its data loader (retries escalate, then silence); 30 min later every other rank's
    watchdog fires on the per-step BROADCAST and the launcher takes the job down."""
    job = _job(ranks, seed)
    seq = 4521
    for k in range(1, 6):
        job.emit(culprit, f"W1105 12:04:{k * 9:02d}.000000 {20000 + culprit} lhotse/dataset/sampling.py:88] GET "
                          f"ais://train/shard-{culprit:05d}.tar failed, retrying {k}/5: Read timed out. (read timeout=60)")
    others = [r for r in range(ranks) if r != culprit]
    for r in others:
        job.waiting(r, seq, f"12:34:{10 + r % 40:02d}")
    job.notified(culprit, "12:34:12", enq=seq - 1, comp=seq - 1, by=others[0])
    job.teardown(others)
    job.launcher_end()
    return job, job.truth(
        "data_loading_stall", [culprit],
        f"Rank {culprit}'s data loader stalled on a storage read (retries escalated to 5/5); it never joined BROADCAST "
        f"SeqNum={seq}, and 30 minutes later every other rank's NCCL watchdog fired.",
        [f"retrying 5/5 on rank {culprit}", f"rank {culprit}: Last enqueued NCCL work: {seq - 1}, last completed NCCL "
                                            f"work: {seq - 1}"],
        ["hang", "cross-rank"], "2024-11-05T12:04:45", title=f"data-loading straggler, {ranks} ranks")


def crash_before_collective(ranks: int = 8, culprit: int = 3, seed: int = 0) -> tuple[Job, dict]:
    """One rank dies on a CUDA error; the others wait in the next ALLREDUCE until their watchdogs fire."""
    job = _job(ranks, seed)
    seq = 812
    for line in ("Traceback (most recent call last):", '  File "/workspace/megatron/training/training.py", line 1187, '
                 "in train_step", "    losses_reduced = forward_backward_func(", "RuntimeError: CUDA error: an illegal "
                 "memory access was encountered"):
        job.emit(culprit, f"[rank{culprit}]: {line}")
    others = [r for r in range(ranks) if r != culprit]
    for r in others:
        job.waiting(r, seq, f"12:15:{10 + r % 40:02d}", op="ALLREDUCE", timeout_ms=600000)
    job.teardown(others, "12:15:50")
    job.launcher_end("12:15:51")
    return job, job.truth("gpu_cuda", [culprit], f"Rank {culprit} crashed with an illegal memory access; the other "
                          f"ranks timed out in ALLREDUCE SeqNum={seq}.", ["CUDA error: an illegal memory access"],
                          ["crash", "cross-rank"], title=f"single-rank CUDA crash, {ranks} ranks")


def broadcast_root_ahead(ranks: int = 8, culprit: int = 6, seed: int = 0) -> tuple[Job, dict]:
    """A straggler never joins BROADCAST S; the root (rank 0) finished its send and queued S+1..S+3, so it is
    ahead by one training step (3 collectives) while everyone else waits at S."""
    job = _job(ranks, seed)
    seq = 3000
    job.waiting(0, seq + 1, "12:34:09", enq=seq + 3, comp=seq)
    others = [r for r in range(1, ranks) if r != culprit]
    for r in others:
        job.waiting(r, seq, f"12:34:{10 + r % 40:02d}")
    job.notified(culprit, "12:34:12", enq=seq - 1, comp=seq - 1, by=0)
    job.teardown([0] + others)
    job.launcher_end()
    return job, job.truth("data_loading_stall", [culprit], f"Rank {culprit} never joined BROADCAST SeqNum={seq}; rank 0 "
                          f"(the root) is one step ahead.", [f"rank {culprit}: enqueued == completed"],
                          ["hang", "cross-rank"], title=f"straggler with broadcast root ahead, {ranks} ranks")


def two_groups_stuck(ranks: int = 8, culprit: int = 2, seed: int = 0) -> tuple[Job, dict]:
    """A tensor-parallel group (PG 1, ranks of the culprit's node) is stuck because one member never entered its
    collective; the default group is stuck later, at a different point, only as a consequence."""
    job = _job(ranks, seed)
    tp = [r for r in range(ranks) if job.node(r) == job.node(culprit)]
    for r in tp:  # the culprit's log just stops: it never reaches the tp collective
        if r != culprit:
            job.waiting(r, 900, f"12:20:{r % 40:02d}", op="ALLGATHER", pg="1", desc="tp", timeout_ms=600000)
    for r in range(ranks):
        if r not in tp:
            job.waiting(r, 55, f"12:44:{10 + r % 40:02d}", op="ALLREDUCE")
    job.teardown([r for r in range(ranks) if r != culprit])
    job.launcher_end()
    return job, job.truth("data_loading_stall", [culprit], f"Rank {culprit} never entered the tp group's ALLGATHER "
                          f"(SeqNum 900); the data-parallel group stalled later as a consequence.", [],
                          ["hang", "cross-rank", "multi-pg"], title=f"two process groups stuck, {ranks} ranks")


def fabric_failure(ranks: int = 8, seed: int = 0) -> tuple[Job, dict]:
    """Every rank entered ALLREDUCE and every rank's own watchdog fired; IB completion errors: the network."""
    job = _job(ranks, seed)
    seq = 1204
    for r in (1, ranks // 2):
        host, pid = job.node(r), 20000 + r
        job.emit(r, "")
        job.emit(r, f"{host}:{pid}:{pid + 90} [{job.local(r)}] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion "
                    f"from peer 10.99.91.63<51161> with status=12 opcode=32614 len=32614 vendor err 129 (Send) localGid "
                    f"::ffff:10.99.92.59 remoteGids::ffff:10.99.91.63 hca mlx5_1")
    for r in range(ranks):
        job.waiting(r, seq, f"12:34:{10 + r % 40:02d}", op="ALLREDUCE")
    job.teardown(list(range(ranks)))
    job.launcher_end()
    return job, job.truth("network", [], "IB retry-exceeded completion errors; every rank entered the collective and "
                          "timed out: a network fault, no straggler.", ["NET/IB: Got completion ... status=12"],
                          ["hang", "network"], nodes=[], title=f"network fabric failure, {ranks} ranks")


def missing_rank_file(ranks: int = 8, culprit: int = 5, seed: int = 0) -> tuple[Job, dict]:
    """The straggler's node file was not collected: the logs cannot name the culprit, only where to look."""
    job, truth = data_loading_straggler(ranks, culprit, seed)
    del job.files[f"error-{job.job_id}-{culprit // job.ranks_per_node}.out"]
    truth["tags"] = ["hang", "partial", "generated"]
    truth["title"] = f"generated: straggler whose node log is missing, {ranks} ranks"
    return job, truth


def gloo_straggler(ranks: int = 8, culprit: int = 1, seed: int = 0) -> tuple[Job, dict]:
    """CPU job on gloo: no work counters; the waiting ranks raise recv timeouts, the culprit's log just stops."""
    job = Job(ranks=ranks, ranks_per_node=min(8, max(1, ranks // 2)), seed=seed)
    for r in range(ranks):
        job.emit(r, f"[rank{r}]: I1105 12:00:0{r % 10}.000000 {20000 + r} train.py:40] rank {r}/{ranks} initialised "
                    f"(backend=gloo, world_size={ranks})")
        job.emit(r, f"[rank{r}]: I1105 12:01:00.000000 {20000 + r} train.py:88] epoch 0 step 10 loss 2.31")
    for r in range(ranks):
        if r == culprit:
            job.emit(r, f"[rank{r}]: I1105 12:01:30.000000 {20000 + r} data.py:51] loading shard 17 from /mnt/data")
            continue
        job.emit(r, f"[rank{r}]: Traceback (most recent call last):")
        job.emit(r, f'[rank{r}]:   File "/workspace/train.py", line 97, in <module>')
        job.emit(r, f"[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
                    f"waiting 1800000ms for recv operation to complete")
    job.launcher_end("12:31:31")
    return job, job.truth("data_loading_stall", [culprit], f"Rank {culprit} stalled loading data; the others timed out "
                          f"in a gloo recv.", [], ["hang", "gloo"], title=f"gloo straggler, {ranks} ranks")


def cuda_oom(ranks: int = 8, culprit: int = 0, seed: int = 0) -> tuple[Job, dict]:
    """One rank runs out of GPU memory on a long batch; the rest wait in the next all-reduce."""
    job = _job(ranks, seed)
    for line in ("Traceback (most recent call last):", '  File "/workspace/megatron/training/training.py", line 1187, '
                 "in train_step", "    output_tensor = model(tokens, position_ids, attention_mask)",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 3 has a total capacity of "
                 "79.10 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.05 GiB memory in "
                 "use. Of the allocated memory 74.20 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but "
                 "unallocated. If reserved but unallocated memory is large try setting "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
                 "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"):
        job.emit(culprit, f"[rank{culprit}]: {line}")
    others = [r for r in range(ranks) if r != culprit]
    for r in others:
        job.waiting(r, 940, f"12:16:{10 + r % 40:02d}", op="ALLREDUCE", timeout_ms=600000)
    job.teardown(others, "12:16:50")
    job.launcher_end("12:16:51")
    return job, job.truth("oom", [culprit], f"Rank {culprit} ran out of GPU memory (tried to allocate 3.50 GiB).",
                          ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB"], ["crash"],
                          title=f"CUDA OOM on one rank, {ranks} ranks")


def corrupt_data(ranks: int = 8, culprit: int = 2, seed: int = 0) -> tuple[Job, dict]:
    """One rank's shard holds a corrupt sample: its loader raises, the rank dies, the others wait."""
    job = _job(ranks, seed)
    path = f"s3://speech/train/shard-{culprit:05d}/utt-0193.flac"
    job.emit(culprit, f"WARNING:root:[Suppressed AudioLoadingError] Error message: Reading audio from '{path}' failed. "
                      f"Details: RuntimeError: Error opening '{path}': Format not recognised.")
    for line in ("Traceback (most recent call last):", '  File "/workspace/nemo/collections/asr/data/audio_to_text.py", '
                 "line 311, in __getitem__", "    audio = self.featurizer.process(sample.audio_file)",
                 f"lhotse.audio.backend.AudioLoadingError: Reading audio from '{path}' failed. Details: "
                 f"RuntimeError: Error opening '{path}': Format not recognised."):
        job.emit(culprit, f"[rank{culprit}]: {line}")
    others = [r for r in range(ranks) if r != culprit]
    for r in others:
        job.waiting(r, 2210, f"12:40:{10 + r % 40:02d}", op="ALLREDUCE")
    job.teardown(others, "12:40:50")
    job.launcher_end("12:40:51")
    return job, job.truth("data", [culprit], f"A corrupt audio sample in rank {culprit}'s shard made its loader raise; "
                          f"the other ranks timed out waiting.", ["AudioLoadingError: Reading audio from ... failed"],
                          ["crash", "cross-rank"], title=f"corrupt sample on one rank, {ranks} ranks")


def slow_rank(ranks: int = 16, culprit: int = 5, seed: int = 0, factor: float = 1.4) -> tuple[Job, dict]:
    """Nothing fails: one rank's GPU is 40% slower, every step waits for it. Megatron's per-rank timers
    (`--timing-log-option all`, FORMATS.md §7.3) are the only place that shows it; the job ends normally."""
    job = Job(ranks=ranks, ranks_per_node=min(8, max(1, ranks // 2)), seed=seed)
    job.startup()
    last = ranks - 1
    for it in range(10, 410, 10):
        comp = [7000.0 * 0.8 * (factor if r == culprit else 1.0) * (1 + job.rnd.gauss(0, 0.02)) for r in range(ranks)]
        step = max(comp) + 280.0
        minute, sec = divmod(it * 8, 60)
        job.emit(last, f" [2024-11-05 {12 + minute // 60:02d}:{minute % 60:02d}:{sec:02d}] iteration {it:8d}/     400 | "
                       f"consumed samples: {it * 256:12d} | elapsed time per iteration (ms): {step:.1f} | learning rate: "
                       f"1.499999E-04 | global batch size:   256 | lm loss: {6.5 - it * 0.002:.6E} | loss scale: 1.0 | "
                       f"grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |")
        job.emit(last, "times across ranks (ms):")
        for name, vals in (("forward-backward", [c + 40.0 for c in comp]),
                           ("all-grads-sync", [80.0 + max(comp) - c for c in comp]), ("optimizer", [200.0] * ranks)):
            job.emit(last, f"  {name}:")
            for r, v in enumerate(vals):
                job.emit(last, f"     rank {r:2d}: {v:.2f}")
    for n in range(job.nodes):
        job.emit_node(n, f"I1105 13:00:00.000000 {19000 + n} torch/distributed/elastic/agent/server/api.py:862] "
                         f"[default] worker group successfully finished. Waiting 300 seconds for other agents to finish.")
    return job, job.truth("infrastructure", [culprit], f"Rank {culprit} is {factor - 1:.0%} slower than the other ranks "
                          f"in every step (its GPU/node); the job finishes, slowly.", ["times across ranks (ms)"],
                          ["slow", "cross-rank"], title=f"one slow rank, {ranks} ranks")


def nan_divergence(ranks: int = 8, seed: int = 0) -> tuple[Job, dict]:
    """The loss diverges to NaN after warm-up; Megatron counts NaN iterations, then the run aborts."""
    job = _job(ranks, seed)
    last = ranks - 1
    for it in range(41, 46):
        job.emit(last, f" [2024-11-05 12:05:{(it - 40) * 7:02d}] iteration {it * 10:8d}/   10000 | consumed samples: "
                       f"{it * 2560:12d} | elapsed time per iteration (ms): 7012.4 | learning rate: 1.499999E-04 | global "
                       f"batch size:   256 | lm loss: NAN | loss scale: 1.0 | grad norm: nan | number of skipped "
                       f"iterations:   0 | number of nan iterations: {it - 40:3d} |")
    job.emit(last, f"[rank{last}]: Traceback (most recent call last):")
    job.emit(last, f'[rank{last}]:   File "/workspace/megatron/training/training.py", line 1240, in train')
    job.emit(last, f"[rank{last}]: AssertionError: found NaN in local grad norm in backward pass before data-parallel "
                   f"communication collective")
    job.launcher_end("12:05:40")
    return job, job.truth("numerical", [], "The loss diverged to NaN after ~400 iterations (grad norm NaN).",
                          ["lm loss: NAN", "number of nan iterations"], ["crash"], nodes=[],
                          title=f"NaN divergence, {ranks} ranks")


def time_limit(ranks: int = 8, seed: int = 0) -> tuple[Job, dict]:
    """A healthy run reaches the SLURM time limit; NCCL noise after the cancel is not a fault."""
    job = _job(ranks, seed)
    for n in range(job.nodes):
        job.emit_node(n, f"slurmstepd: error: *** STEP {job.job_id}.0 ON {job.node(n * job.ranks_per_node)} CANCELLED AT "
                         f"2024-11-05T16:00:03 DUE TO TIME LIMIT ***")
    job.emit_node(0, "W1105 16:00:03.000000 19000 torch/distributed/elastic/agent/server/api.py:704] Received 15 death "
                     "signal, shutting down workers")
    return job, job.truth("infrastructure", [], "SLURM cancelled the job at its time limit; nothing failed before.",
                          ["CANCELLED AT 2024-11-05T16:00:03 DUE TO TIME LIMIT"], ["control", "scheduler"], nodes=[],
                          title=f"time limit, {ranks} ranks")


def shm_exhaustion(ranks: int = 8, seed: int = 0) -> tuple[Job, dict]:
    """The container's /dev/shm is 64 MB: NCCL cannot create its shared-memory segments at the first collective."""
    job = Job(ranks=ranks, ranks_per_node=min(8, max(1, ranks // 2)), seed=seed)
    job.startup()
    for r in range(job.ranks_per_node):
        host, pid = job.node(r), 20000 + r
        job.emit(r, "")
        job.emit(r, f"{host}:{pid}:{pid + 70} [{r}] include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space "
                    f"left on device")
        job.emit(r, f"{host}:{pid}:{pid + 70} [{r}] include/shm.h:48 NCCL WARN Error while creating shared memory "
                    f"segment nccl-shm-recv-250a7cc850ba9298-0-{r}-3 (size 9637888)")
        job.emit(r, f"[rank{r}]: torch.distributed.DistBackendError: NCCL error in: "
                    f"../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error (run with NCCL_DEBUG=INFO "
                    f"for details), NCCL version 2.21.5")
    job.launcher_end("12:00:31")
    return job, job.truth("infrastructure", [], "/dev/shm in the container is too small for NCCL's shared-memory "
                          "transport.", ["posix_fallocate failed: No space left on device"], ["crash", "startup"],
                          nodes=[], title=f"/dev/shm exhaustion, {ranks} ranks")


def port_in_use(ranks: int = 8, seed: int = 0) -> tuple[Job, dict]:
    """A second job on the node already holds the default rendezvous port: start-up fails at once."""
    job = Job(ranks=ranks, ranks_per_node=min(8, max(1, ranks // 2)), seed=seed)
    job.emit_node(0, "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address "
                     "already in use).")
    job.emit_node(0, "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                     "address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). "
                     "The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).")
    job.emit_node(0, f"srun: error: {job.node(0)}: task 0: Exited with exit code 1")
    return job, job.truth("config", [], "The rendezvous port 29500 was already in use on the node.",
                          ["errno: 98 - Address already in use"], ["crash", "startup"], nodes=[],
                          title="port already in use")


def clean_run(ranks: int = 8, seed: int = 0) -> tuple[Job, dict]:
    """A healthy run that finishes, with the usual noise (recovering retries, warnings)."""
    job = _job(ranks, seed)
    for n in range(job.nodes):
        job.emit_node(n, f"I1105 13:00:00.000000 {19000 + n} torch/distributed/elastic/agent/server/api.py:862] [default] "
                         f"worker group successfully finished. Waiting 300 seconds for other agents to finish.")
    return job, job.truth("none", [], "The job finished normally.", [], ["control"], nodes=[],
                          title=f"clean run, {ranks} ranks")


def _scenarios() -> dict:
    """Every case in cases/ that the generator owns: each failure type at 8, 128 and 1024 ranks, the culprit at
    rank 0, 1, the middle and the last rank. Slugs are neutral (they never name the cause)."""
    out = {"gen-slurm-8r-a": lambda: data_loading_straggler(ranks=8, culprit=5, seed=1)}
    plan = [
        (data_loading_straggler, {"culprit": lambda n: [0, n // 2, n - 1]}),
        (crash_before_collective, {"culprit": lambda n: [1, n - 1]}),
        (cuda_oom, {"culprit": lambda n: [0, n // 2]}),
        (broadcast_root_ahead, {"culprit": lambda n: [n - 1]}),
        (two_groups_stuck, {"culprit": lambda n: [2]}),
        (gloo_straggler, {"culprit": lambda n: [1]}),
        (missing_rank_file, {"culprit": lambda n: [n // 2 + 1]}),
        (fabric_failure, {}), (nan_divergence, {}), (time_limit, {}), (shm_exhaustion, {}), (clean_run, {}),
        (corrupt_data, {"culprit": lambda n: [2]}),
    ]
    k = 0
    for fn, opts in plan:
        for n in (8, 128, 1024):
            for c in opts.get("culprit", lambda n: [None])(n):
                k += 1
                kw = {"ranks": n, "seed": k} | ({"culprit": c} if c is not None else {})
                out[f"gen-{n}r-{k:03d}"] = (lambda fn=fn, kw=kw: fn(**kw))
    out["gen-port-001"] = lambda: port_in_use(ranks=8, seed=99)
    out["gen-slow-16r-a"] = lambda: slow_rank(ranks=16, culprit=5, seed=101)
    out["gen-slow-128r-b"] = lambda: slow_rank(ranks=128, culprit=77, seed=102)
    return out


SCENARIOS = _scenarios()
MAX_PLAIN = 1_500_000  # bytes: larger bundles are written as one logs.tar.gz (cases stay under 2 MB)


def write_case(dest: Path, job: Job, truth: dict) -> None:
    import io
    import tarfile
    dest.mkdir(parents=True, exist_ok=True)
    blobs = {name: ("\n".join(lines) + "\n").encode() for name, lines in job.files.items()}
    if sum(map(len, blobs.values())) > MAX_PLAIN:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as t:
            for name, data in sorted(blobs.items()):
                info = tarfile.TarInfo(f"logs/{name}")
                info.size, info.mtime = len(data), 1730808000
                t.addfile(info, io.BytesIO(data))
        with gzip.GzipFile(dest / "logs.tar.gz", "wb", compresslevel=9, mtime=0) as gz:  # same bytes every run
            gz.write(raw.getvalue())
    else:
        for name, data in blobs.items():
            (dest / name).write_bytes(data)
    if truth:
        (dest / "truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False, width=100), encoding="utf-8")


def storage_case(dest: Path, seed: int, ranks: int = 8, culprit: int = 5, pressured: int = 1) -> dict:
    """An `ais log get cluster` bundle plus worker logs in another zone (eval/synth/ais.py), with its truth
    written in the case format (the generator's manifest goes into `notes`, never into the bundle)."""
    from trainlog_debugger.eval.synth.ais import Scenario, generate
    manifest = generate(dest, Scenario(seed=seed, ranks=ranks, culprit=culprit, pressured=pressured,
                                       ranks_per_node=max(1, ranks // 2)))
    target = manifest["pressured"][0]
    truth = {"category": "storage_io", "culprit_ranks": [culprit], "culprit_nodes": [target],
             "root_cause": f"AIStore target {target} under memory/disk pressure broke its inter-target streams; batch "
                          f"GETs returned fewer objects; rank {culprit}'s batch loader failed and the job hung until "
                          f"the NCCL watchdog fired.",
             "evidence": ["resource pressure: load=critical", "shared-dm ... broken pipe", "out-of-bounds index",
                          "AISBatchLoaderError"],
             "tags": ["hang", "storage", "clocks", "cross-rank", "generated"],
             "title": f"generated: storage chain, {ranks} ranks, workers in UTC-7", "framework": "NeMo + AIStore",
             "scale": f"{ranks} ranks", "confidence": "high", "source_url": "generated by eval/synth/ais.py",
             "notes": f"generator manifest: {manifest}"}
    (dest / "truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False, width=100), encoding="utf-8")
    return truth


STORAGE_CASES = {"gen-ais-8r-a": dict(seed=11), "gen-ais-16r-b": dict(seed=12, ranks=16, culprit=0, pressured=2),
                 "gen-ais-8r-c": dict(seed=13, culprit=7, pressured=0)}


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "cases")
    for slug, make in SCENARIOS.items():
        job, truth = make()
        write_case(out / slug, job, truth)
        print(f"wrote {out / slug} ({len(job.files)} files)")
    for slug, kw in STORAGE_CASES.items():
        storage_case(out / slug, **kw)
        print(f"wrote {out / slug}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
