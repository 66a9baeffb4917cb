"""Seeded synthetic log bundle for the scan benchmark (eval/bench/scan.py), with a ground-truth manifest.

Why synthetic and why like this: the scan must be timed on GBs of realistic text, and it must provably find the
few fatal lines buried in it. Ordinary lines follow ../shared/FORMATS.md (35 % Megatron iteration lines, 30 % NCCL
INFO, 20 % logger lines, 15 % memory reports) and contain the near-misses real logs have (`lm loss:`, `grad norm:`,
`number of nan iterations:   0`, `->` and `NET/IB` in every NCCL channel line) but match no catalog trigger. The
needles (the NCCL watchdog cascade on every rank, a straggler, tracebacks, retries, Xid 79, NET/IB errors) are
declared here with the catalog pattern ids each line must hit: that declaration, not the scanner, is the truth the
manifest records (per pattern id: line count and per-rank counts; plus the number of lines any trigger hits, which
`rg -c` must reproduce). Lines are made by cheap arithmetic on a counter (no per-field RNG), in 2 processes, so
1 GiB takes seconds. Same seed and size → byte-identical files.

Two more knobs for the benchmark's matrix: `ranks` (one file per rank: 16-4,096 files of the same total size, for
per-file costs) and `hits` (the share of lines that match the catalog, 0.1-10 %: a 1,024-rank NCCL_DEBUG=INFO job
logs ~10 % `ncclCommInitRank ... Init COMPLETE` lines, one per communicator and rank, for per-hit costs). Hit lines
are real NCCL init lines (FORMATS.md §NCCL, `nccl.comm_init`) inserted at an even rate, declared like the needles.
With hits=0 the bytes are those of earlier versions.
"""

from __future__ import annotations

import json
import os
import random
from multiprocessing import get_context
from pathlib import Path

NODE_GPUS = 8
GEN_VERSION = 3  # bump when lines or their declared pattern ids change: a bundle on disk is then regenerated
SEQ = 5231  # the collective that timed out
BLOCK_KINDS = "I" * 7 + "N" * 6 + "L" * 4 + "M" * 3  # one cycle of 20 ordinary lines
SCENARIOS = ("default", "cascade")
LAYOUTS = ("rank", "node")  # one file per rank, or one torchrun `--tee` output per node of NODE_GPUS ranks
CASCADE_WAIT = 1887  # cascade: seconds from the last step to the watchdog (Timeout(ms)=1800000, then the 87 s it ran over)
RETRY_IDS = ("io.retrying",)  # the culprit's read-timeout retries (io.timed_out is a fallback: a line another id hits is not its)


def layout(rank: int) -> tuple[str, str]:
    """(relative path, line prefix): most ranks are `rank_N.log` with c10's `[rankN]:` prefix on every line;
    every 16th is a plain NeMo per-rank file without prefixes (the rank is in the file name)."""
    node = f"node{rank // NODE_GPUS:02d}"
    if rank % 16 == 15:
        return f"{node}/nemo_log_globalrank-{rank}_localrank-{rank % NODE_GPUS}.txt", ""
    return f"{node}/rank_{rank}.log", f"[rank{rank}]:"


def plan(seed: int, ranks: int, scenario: str = "default") -> dict:
    """Which ranks carry which needle (seeded). "cascade": only the culprit (the other ranks carry the cascade)."""
    if scenario == "cascade":
        return {"culprit": random.Random(f"bench-plan:{seed}:cascade").randrange(ranks), "cause": "data_loading_stall"}
    rng = random.Random(f"bench-plan:{seed}")
    pick = rng.sample(range(ranks), 6)
    return {"straggler": pick[0], "oom": pick[1], "illegal_access": pick[2], "runtime_error": pick[3],
            "ib_error": sorted(pick[4:6]), "xid": pick[2],
            "conn_reset": sorted(rng.sample(range(ranks), max(1, ranks // 10)))}


def _clock(sec: int) -> str:
    h, rem = divmod(sec, 3600)
    return f"{h:02d}:{rem // 60:02d}:{rem % 60:02d}"


def _ordinary(rank: int, prefix: str, c: int, sec: int, order: str, host: str, pid: int, world: int = 256) -> list[str]:
    """20 ordinary lines for cycle c; every number is arithmetic on (rank, c, k), nothing matches a trigger.
    `world` is the communicator size the NCCL lines state (peers are ranks below it)."""
    t = _clock(sec)
    dev = rank % NODE_GPUS
    out = []
    for k, kind in enumerate(order):
        it = c * 7 + k
        v = (it * 7919 + rank * 104729) % 10007
        if kind == "I":
            out.append(
                f"{prefix} [2024-11-05 {t}.{v * 97 % 1000000:06d}] iteration {it:8d}/{10000000:8d} | consumed samples: "
                f"{it * 1024:12d} | elapsed time per iteration (ms): {1100 + v % 300 + k / 10:.1f} | throughput per GPU "
                f"(TFLOP/s/GPU): {380 + v % 50:.1f} | learning rate: {1.5e-4 - v * 1e-9:.6E} | global batch size:  1024 | "
                f"lm loss: {2.0 + v / 5000:.6E} | loss scale: 1.0 | grad norm: {0.2 + v / 20000:.3f} | number of skipped "
                f"iterations:   0 | number of nan iterations:   0 |\n")
        elif kind == "N":
            ch, peer = v % 32, (rank + 1 + v % 7) % world
            head = f"{prefix}{host}:{pid}:{pid + 55 + ch % 4} [{dev}] NCCL INFO "
            if k % 3 == 0:
                out.append(f"{head}Channel {ch:02d}/0 : {rank}[{dev}{v % 10}000] -> {peer}[{peer % 8}b000] [send] via NET/IB/{ch % 4}\n")
            elif k % 3 == 1:
                out.append(f"{head}Channel {ch:02d}/1 : {peer}[{peer % 8}b000] -> {rank}[{dev}{v % 10}000] [receive] via NET/IB/{ch % 4}/GDRDMA\n")
            else:
                out.append(f"{head}Trees [0] {peer}/-1/-1->{rank}->{(rank + world - 1) % world} [1] -1/-1/-1->{rank}->{peer} "
                           f"comm 0x{v * 4099:x} nRanks {world}\n")
        elif kind == "L":
            if k % 2:
                out.append(f"{prefix}[W1105 {t}.{v * 99991 % 1000000000:09d} ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID "
                           f"0(default_pg) Rank {rank}] using GPU {dev} to perform barrier as devices used by this process "
                           f"are currently unknown.\n")
            else:
                out.append(f"{prefix} 2024-11-05 {t},{v % 1000:03d} - INFO - megatron.training.checkpointing - saving "
                           f"checkpoint at iteration {it:8d} to /checkpoints/gpt3-175b in torch_dist format (shard {v % 64})\n")
        else:
            a = 40000 + v % 3000
            out.append(f"{prefix} [Rank {rank}] (after {it} iterations) memory (MB) | allocated: {a}.{v % 100:02d} | max "
                       f"allocated: {a + 9000}.25 | reserved: {a + 12000}.00 | max reserved: {a + 14000}.00\n")
    return out


def _needles(rank: int, prefix: str, p: dict, host: str, pid: int, sec: int, world: int = 256) -> tuple[list, list]:
    """(middle needles [(fraction, [(line, [pattern ids])])], tail lines [(line, ids)]) for one rank. The default
    plan's needles, or the cascade's (plan() with scenario "cascade": only `culprit` is set)."""
    P, t = prefix, _clock(sec)
    e = f"{P}[E1105 {t}.{rank * 7919 % 1000000000:09d} ProcessGroupNCCL.cpp"
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    head = f"{P}{host}:{pid}:{pid + 57} [{rank % NODE_GPUS}] NCCL "
    mid: list = [(0.0, [(f"{head}INFO comm 0x7f3a{rank:04x} rank {rank} nranks {world} cudaDev {rank % NODE_GPUS} nvmlDev "
                         f"{rank % NODE_GPUS} busId {rank % NODE_GPUS}b000 commId 0x5e1f2a9c - Init COMPLETE\n", ["nccl.comm_init"])])]
    if rank == 0:
        mid[0][1][0:0] = [(f"{head}INFO NCCL version 2.21.5+cuda12.4\n", ["nccl.version"]),
                          (f"{P} using world size: {world}, data-parallel size: {world // 8}, context-parallel size: 1, "
                           f"tensor-model-parallel size: 8, pipeline-model-parallel size: 1\n", ["job.world_size"])]
    if rank in p.get("conn_reset", ()):
        for j in range(1 + rank % 3):
            mid.append((0.2 + 0.25 * j, [(f"{P} 2024-11-05 {t},512 - WARNING - megatron.core.datasets.object_storage - GET "
                                          f"s3://datasets/pile/shard-{rank * 7 + j:06d}.tar failed: [Errno 104] Connection "
                                          f"reset by peer; retrying 1/5 in 2.0 s\n", ["io.retrying"])]))  # the reset is a fallback
    if rank in p.get("ib_error", ()):
        mid.append((0.97, [(f"{head}WARN NET/IB : Got completion from peer 10.0.{rank // 8}.23<53412> with status=12 opcode=0 "
                            f"len=0 vendor err 129 (Send) localGid ::ffff:10.0.1.22 remoteGids::ffff:10.0.1.23 hca mlx5_2\n",
                            ["nccl.ib_completion_error"]),
                           (f"{head}INFO transport/net.cc:1261 -> 6\n", ["nccl.error_return"])]))
    tail: list = []
    if rank == p.get("xid"):
        tail.append((f"[Tue Nov  5 {t} 2024] NVRM: Xid (PCI:0000:{rank % 8}b:00): 79, pid='<unknown>', name=<unknown>, "
                     f"GPU has fallen off the bus.\n", ["kernel.xid"]))
    exc = {} if "culprit" in p else {p["oom"]: ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
                      "79.10 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.85 GiB memory in "
                      "use. Of the allocated memory 75.01 GiB is allocated by PyTorch, and 1.97 GiB is reserved by PyTorch but "
                      "unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF="
                      "expandable_segments:True to avoid fragmentation.", ["cuda.oom"]),
           p["illegal_access"]: ("RuntimeError: CUDA error: an illegal memory access was encountered",
                                 ["cuda.error", "python.exception"]),
           p["runtime_error"]: ("RuntimeError: The size of tensor a (4096) must match the size of tensor b (8192) at "
                                "non-singleton dimension 2", ["python.exception"])}
    if rank in exc:
        tail.append((f"{P} Traceback (most recent call last):\n", ["python.traceback"]))
        for fn, ln, func, code in (("pretrain_gpt.py", 287, "<module>", "pretrain("),
                                   ("megatron/training/training.py", 1385, "train", "train_step(forward_step_func,"),
                                   ("torch/nn/modules/module.py", 1736, "_call_impl", "return forward_call(*args, **kwargs)")):
            tail += [(f'{P}   File "/workspace/{fn}", line {ln}, in {func}\n', []), (f"{P}     {code}\n", [])]
        tail.append((f"{P} {exc[rank][0]}\n", exc[rank][1]))
        if rank == p.get("illegal_access"):
            tail += [(f"{P} CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                      f"below might be incorrect.\n", []), (f"{P} For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n", [])]
    wd = (f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={SEQ}, OpType=ALLREDUCE, NumelIn="
          f"117440512, NumelOut=117440512, Timeout(ms)=1800000) ran for 1800087 milliseconds before timing out.")
    enq = SEQ - 1 if rank in (p.get("straggler"), p.get("culprit")) else SEQ
    dump = [(f"{e}:1982] {pg} Observed flight recorder dump signal from another rank via TCPStore.\n",
             ["pytorch.dump_observed"]),
            (f"{e}:1671] {pg} Received a dump signal due to a collective timeout from  rank {(rank + 1) % world} and we "
             f"will try our best to dump the debug info. Last enqueued NCCL work: {enq}, last completed NCCL work: "
             f"{SEQ - 1}.This is most likely caused by incorrect usages of collectives. \n", ["pytorch.dump_signal_received"])]
    if rank == p.get("culprit"):
        # it never enqueued SEQ, so its own watchdog has nothing to time out: it is only told by the first rank
        # that timed out (TCPStore dump signal); its last lines before that are the data reads it is stuck in
        t0 = sec - CASCADE_WAIT
        mid.append((1.0, [(f"{P} 2024-11-05 {_clock(t0 + 10 + 69 * k)},{(k * 137) % 1000:03d} - WARNING - "
                           f"megatron.core.datasets.object_storage - GET s3://datasets/pile/shard-{rank * 7:06d}.tar "
                           f"failed: Read timed out. (read timeout=60); retrying {k}/5 in 2.0 s\n", list(RETRY_IDS))
                          for k in range(1, 6)]))
        return mid, dump
    tail += [(f"{e}:616] {wd}\n", ["pytorch.watchdog_timeout"]),
             (f"{e}:2168] {pg}  failure detected by watchdog at work sequence id: {SEQ} PG status: last enqueued work: "
              f"{enq}, last completed work: {SEQ - 1}\n", ["pytorch.watchdog_pg_status"])]
    if rank == p.get("straggler"):
        tail += dump
    else:
        tail.append((f"{e}:1975] {pg} First PG on this rank to signal dumping.\n", ["pytorch.dump_first_signal"]))
    tail += [(f"{e}:630] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
              f"CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n", ["pytorch.nccl_ops_failed"]),
             (f"{e}:636] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.\n",
              ["pytorch.process_down"]),
             (f"{e}:1595] {pg} Process group watchdog thread terminated with exception: {wd}\n",
              ["pytorch.watchdog_thread_exception", "pytorch.watchdog_timeout"]),
             ("terminate called after throwing an instance of 'c10::DistBackendError'\n", ["pytorch.terminate_backend_error"]),
             (f"  what():  {pg} Process group watchdog thread terminated with exception: {wd}\n",
              ["pytorch.watchdog_thread_exception", "pytorch.watchdog_timeout"]),
             ("Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 "
              "(most recent call first):\n", [])]
    tail += [(f"frame #{i}: {fn} + 0x{0x96 + i * 0x1f0:x} (0x7f3a2c9{i}c446 in /usr/local/lib/python3.10/dist-packages/"
              f"torch/lib/{lib})\n", []) for i, (fn, lib) in enumerate((
                  ("c10::Error::Error(c10::SourceLocation, std::string)", "libc10.so"),
                  ("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, "
                   "1000l> > >)", "libtorch_cuda.so"),
                  ("c10d::ProcessGroupNCCL::watchdogHandler()", "libtorch_cuda.so")))]
    return mid, tail


def _hit_line(rank: int, prefix: str, host: str, pid: int, n: int, world: int = 256) -> str:
    """The n-th communicator init line of a rank (NCCL_DEBUG=INFO prints one per communicator it joins)."""
    dev = rank % NODE_GPUS
    return (f"{prefix}{host}:{pid}:{pid + 57} [{dev}] NCCL INFO comm 0x7f{n * 2654435761 % (1 << 32):08x} rank {rank} "
            f"nranks {world} cudaDev {dev} nvmlDev {dev} busId {dev}b000 commId 0x{n * 40503 % (1 << 32):08x} - Init COMPLETE\n")


def _rank_chunks(rank: int, prefix: str, per_file: int, seed: int, p: dict, hits: float, world: int,
                 stats: dict):
    """One rank's text as chunks of lines, in order; `stats` gets counts (per pattern id), matched and lines at the
    end. The same bytes whatever the caller does with them (a per-rank file, or a node's interleaved output)."""
    rng = random.Random(f"bench-file:{seed}:{rank}")
    order = "".join(rng.sample(BLOCK_KINDS, len(BLOCK_KINDS)))
    host, pid = f"node{rank // NODE_GPUS:02d}", 2000 + rng.randrange(60000)
    cycles_est = max(1, per_file // 4400)
    step = max(1, min(8, 60000 // cycles_est))
    sec0 = 3 * 3600
    wait = CASCADE_WAIT if "culprit" in p else 600
    mid, tail = _needles(rank, prefix, p, host, pid, sec0 + cycles_est * step + wait, world)
    tail_bytes = sum(len(s.encode()) for s, _ in tail)
    counts: dict[str, int] = {}
    matched = 0

    def take(lines):
        nonlocal matched
        for s, ids in lines:
            matched += bool(ids)
            for i in ids:
                counts[i] = counts.get(i, 0) + 1
        return [s for s, _ in lines]

    target = per_file - tail_bytes
    written = nlines = c = nhit = 0
    per_cycle, owed = 20 * hits / (1 - hits) if 0 < hits < 1 else 0.0, 0.0  # k/(20+k) = hits
    mid.sort(key=lambda m: m[0])
    buf: list[str] = []
    while written < target:
        while mid and written >= mid[0][0] * target:
            lines = take(mid.pop(0)[1])
            buf += lines
            nlines += len(lines)
        block = _ordinary(rank, prefix, c, sec0 + c * step, order, host, pid, world)
        owed += per_cycle
        while owed >= 1:
            owed -= 1
            block.insert(nhit * 7 % len(block), take([(_hit_line(rank, prefix, host, pid, nhit, world),
                                                       ["nccl.comm_init"])])[0])
            nhit += 1
        nlines += len(block)
        s = "".join(block)
        buf.append(s)
        written += len(s)  # ASCII: chars == bytes
        c += 1
        if len(buf) >= 64:
            yield "".join(buf)
            buf = []
    for _, lines in mid:
        buf += take(lines)
    buf += take(tail)
    yield "".join(buf)
    nlines += len(tail) + sum(len(lines) for _, lines in mid)
    stats.update(counts=counts, matched=matched, lines=nlines)


def _write_file(job: tuple) -> dict:
    """One rank's file (layout "rank")."""
    rank, root, per_file, seed, p, hits, world = job
    rel, prefix = layout(rank)
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    st: dict = {}
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for chunk in _rank_chunks(rank, prefix, per_file, seed, p, hits, world, st):
            f.write(chunk)
    return {"rank": rank, "file": rel, "bytes": path.stat().st_size, "lines": st["lines"],
            "per_rank": {rank: st["counts"]}, "matched": st["matched"]}


def node_file(node: int) -> str:
    """A node's output: SLURM `--output=%x-%j-%N.out` of one torchrun per node."""
    return f"gpt3-4242-node{node:02d}.out"


def _write_node(job: tuple) -> dict:
    """One node's file (layout "node"): torchrun `--tee 3` output of its NODE_GPUS local ranks, every line prefixed
    `[default{local_rank}]:` (tail_log.py, FORMATS.md 2.4) over c10's `[rank{R}]:`; the local ranks' lines interleave
    in blocks of 20 lines (each worker's pipe is flushed in bursts), each rank's own order kept."""
    node, root, per_file, seed, p, hits, world = job
    ranks = range(node * NODE_GPUS, (node + 1) * NODE_GPUS)
    streams, per_rank, matched, nlines = [], {}, 0, 0
    for r in ranks:
        st: dict = {}
        lines = "".join(_rank_chunks(r, f"[rank{r}]:", per_file, seed, p, hits, world, st)).splitlines(keepends=True)
        head = f"[default{r % NODE_GPUS}]:"
        streams.append([head + ln for ln in lines])
        per_rank[r], matched, nlines = st["counts"], matched + st["matched"], nlines + st["lines"]
    path = Path(root) / node_file(node)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for i in range(0, max(len(s) for s in streams), 20):
            f.write("".join("".join(s[i:i + 20]) for s in streams))
    return {"rank": ranks[0], "ranks": list(ranks), "file": path.name, "bytes": path.stat().st_size, "lines": nlines,
            "per_rank": per_rank, "matched": matched}


def bundle_name(size_gib: float, seed: int, ranks: int, hits: float = 0.0, scenario: str = "default",
                layout: str = "rank") -> str:
    """The bundle's directory name under the data dir (its manifest is `<name>.manifest.json`)."""
    return (f"logs-{size_gib:g}gib-{ranks}r-s{seed}" + (f"-h{hits:g}" if hits else "")
            + ("" if scenario == "default" else f"-{scenario}") + ("" if layout == "rank" else f"-per{layout}"))


def generate(data: Path, size_gib: float, seed: int = 42, ranks: int = 256, hits: float = 0.0,
             scenario: str = "default", layout: str = "rank") -> tuple[Path, dict]:
    """Write (or reuse) the bundle; return (bundle dir, manifest). Reused when the manifest's parameters match
    and the files are all there with their recorded sizes; the manifest is written last. `ranks` is bounded
    to 1..65,536 and `hits` to 0..0.5 (they size the file list and the lines).

    scenario "default": the needles of plan() in a 256-rank job's lines, whatever `ranks` (earlier versions' bytes).
    scenario "cascade": a realistic at-scale hang: the logs state a world of `ranks`; one culprit rank (the
    manifest's plan.culprit) stalls in a data read (read-timeout retries up to 5/5) and never enters collective
    SEQ, so it is only notified by the dump signal (last enqueued = last completed = SEQ-1); every other rank ends
    in the full NCCL watchdog cascade for SEQ. No other needle. layout "node": one file per node of 8 ranks
    (needs ranks % 8 == 0; default scenario only per rank)."""
    if scenario not in SCENARIOS or layout not in LAYOUTS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, layout one of {LAYOUTS}")
    ranks, hits = min(max(int(ranks), 8), 65536), min(max(float(hits), 0.0), 0.5)
    if layout == "node" and (scenario == "default" or ranks % NODE_GPUS):
        raise ValueError(f"layout 'node' needs scenario 'cascade' and a multiple of {NODE_GPUS} ranks")
    name = bundle_name(size_gib, seed, ranks, hits, scenario, layout)
    root, mpath = data / name, data / f"{name}.manifest.json"
    size = int(size_gib * (1 << 30))
    if mpath.exists():
        man = json.loads(mpath.read_text())
        if (man.get("gen_version"), man.get("size_target"), man.get("seed"), man.get("ranks")) == (
                GEN_VERSION, size, seed, ranks) and man.get("hits", 0.0) == hits and (
                man.get("scenario", "default"), man.get("layout", "rank")) == (scenario, layout) and all(
                (root / f["file"]).is_file() and (root / f["file"]).stat().st_size == f["bytes"] for f in man["files"]):
            return root, man
    p = plan(seed, ranks, scenario)
    world = ranks if scenario == "cascade" else 256
    if layout == "node":
        write, jobs = _write_node, [(n, str(root), size // ranks, seed, p, hits, world) for n in range(ranks // NODE_GPUS)]
    else:
        write, jobs = _write_file, [(r, str(root), size // ranks, seed, p, hits, world) for r in range(ranks)]
    with get_context("fork").Pool(min(2, os.cpu_count() or 1)) as pool:
        res = sorted(pool.map(write, jobs, chunksize=4), key=lambda d: d["rank"])
    pats: dict[str, dict] = {}
    for d in res:
        for rank, counts in d.pop("per_rank").items():
            for pid, n in counts.items():
                e = pats.setdefault(pid, {"count": 0, "ranks": {}})
                e["count"] += n
                e["ranks"][str(rank)] = n
    for e in pats.values():
        e["ranks"] = dict(sorted(e["ranks"].items(), key=lambda kv: int(kv[0])))
    man = {"gen_version": GEN_VERSION, "seed": seed, "ranks": ranks, "hits": hits, "size_target": size, "dir": name,
           "bytes": sum(d["bytes"] for d in res), "lines": sum(d["lines"] for d in res),
           "matched_lines": sum(d["matched"] for d in res), "plan": p,
           "patterns": dict(sorted(pats.items())), "files": res}
    if scenario != "default" or layout != "rank":  # default manifests stay those of earlier versions
        man = {"scenario": scenario, "layout": layout, **man}
    mpath.write_text(json.dumps(man, indent=1))
    return root, man
