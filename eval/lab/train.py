"""A tiny real DDP training job (CPU, gloo) with injectable faults, for eval/lab/run_lab.py.

Run it under torchrun, never directly:

    python -m torch.distributed.run --nproc_per_node=4 eval/lab/train.py --steps 30 --fault stall --fault-rank 2

It trains a small MLP on synthetic data (Dataset + DistributedSampler + DataLoader), DDP over gloo (or, with --grad-sync
manual, one all_reduce per gradient), and logs `step N loss X` on every rank with a timestamp (Python logging, stderr)
plus a few `print` lines (stdout), as ordinary training scripts do. Faults (flag or LAB_FAULT* env vars):

- `stall`: rank K's Dataset.__getitem__ blocks forever (a read that never returns) at step S; the other ranks
  wait in the next gradient all-reduce until the process-group timeout (--pg-timeout, 20 s) raises.
- `kill`: rank K sends itself SIGKILL at step S (what the kernel OOM killer or an operator's `kill -9` does).
- `raise`: rank K hits a real shape bug at step S (a feature-dropping code path feeds the model the wrong width),
  so torch raises `RuntimeError: mat1 and mat2 shapes cannot be multiplied`.
- `oom`: from step S rank K keeps every step's outputs in a growing cache (256 MiB a step) under an address-space
  cap (RLIMIT_AS = current size + --oom-headroom-mb, only in that rank) until the CPU allocator fails.
- `nan`: from step S the learning rate is multiplied by 1e8 (a scheduler bug) on every rank; the loss check raises
  `FloatingPointError: Loss became infinite or NaN at iteration=N!` as detectron2's trainer does.
- `skip_collective`: every step all ranks all-reduce the loss for logging; rank K skips it at step S, so its next
  collective (the gradient all-reduce) meets the others' loss all-reduce. With TORCH_DISTRIBUTED_DEBUG=DETAIL
  the process-group wrapper detects the mismatch; without it gloo fails on the size mismatch or times out.
- `nofile`: rank K runs with a low open-files limit (RLIMIT_NOFILE, as on a node whose `ulimit -n` was left low),
  sized so that it lasts about S steps; with --shard-dir every rank keeps each shard file it reads open (a cache
  sized for the usual limit), so rank K's next `open` fails with `OSError: [Errno 24] Too many open files`.
- `slow_eval`: at step S rank K (rank 0 in the lab) runs an evaluation pass that only it runs (~0.15 s a batch,
  200 batches, longer than the process-group timeout) while the others go on to the next gradient all-reduce and
  time out there.
- `none`: the run finishes normally.

`--dump-stacks-on-sigterm` registers faulthandler for SIGTERM (the launcher's stop signal), so a rank that is
stopped prints its Python stacks before it dies.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import re
import resource
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

log = logging.getLogger("train")

FEATURES, CLASSES, SHARD = 32, 8, 256


class ShardedSynthetic(Dataset):
    """Deterministic synthetic samples stored in 'shards' of 256 records; logs the first read of each shard."""

    def __init__(self, length: int, stall_index: int | None = None, shard_dir: str | None = None):
        self.length = length
        self.stall_index = stall_index
        self.shard_dir = shard_dir
        self.opened: set[int] = set()
        self.handles: dict[int, object] = {}  # with a shard dir: open shard files, kept open once read
        w = torch.Generator().manual_seed(1234)
        self.proj = torch.randn(FEATURES, CLASSES, generator=w)

    def __len__(self) -> int:
        return self.length

    def _read(self, idx: int) -> torch.Tensor:
        shard = idx // SHARD
        if shard not in self.opened:  # shards stay open (and cached) once read
            self.opened.add(shard)
            if self.shard_dir:
                path = os.path.join(self.shard_dir, f"shard-{shard:05d}.bin")
                self.handles[shard] = open(path, "a+b")
            else:
                log.info("opened shard data/train/shard-%05d.bin (records %d-%d)", shard, shard * SHARD,
                         shard * SHARD + SHARD - 1)
        if idx == self.stall_index:
            while True:  # a read that never returns (a hung network mount, a dead storage target)
                time.sleep(3600)
        return torch.randn(FEATURES, generator=torch.Generator().manual_seed(idx))

    def __getitem__(self, idx: int):
        x = self._read(idx)
        y = int((x @ self.proj).argmax())
        return x, y


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                 nn.Linear(64, CLASSES))

    def forward(self, x):
        return self.net(x)


def parse() -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--pg-timeout", type=float, default=20.0, help="process-group timeout, seconds")
    p.add_argument("--fault", default=env("LAB_FAULT", "none"),
                   choices=["none", "stall", "kill", "raise", "oom", "nan", "skip_collective", "nofile", "slow_eval"])
    p.add_argument("--fault-rank", type=int, default=int(env("LAB_FAULT_RANK", "1")))
    p.add_argument("--fault-step", type=int, default=int(env("LAB_FAULT_STEP", "10")))
    p.add_argument("--oom-headroom-mb", type=int, default=1024)
    p.add_argument("--grad-sync", choices=["ddp", "manual"], default="ddp",
                   help="ddp: DistributedDataParallel; manual: broadcast the weights, all_reduce each gradient")
    p.add_argument("--dump-stacks-on-sigterm", action="store_true")
    p.add_argument("--shard-dir", help="keep the dataset's shards as real files here (4 records a shard), "
                                        "each kept open once read")
    return p.parse_args()


def rss_mb() -> int:
    m = re.search(r"VmRSS:\s+(\d+) kB", open("/proc/self/status").read())
    return int(m.group(1)) // 1024 if m else -1


def cap_address_space(headroom_mb: int) -> None:
    vm = int(re.search(r"VmSize:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (vm + headroom_mb * 2**20, hard))


def evaluate(model: nn.Module, data: Dataset, batch: int, batches: int = 200) -> None:
    """A validation pass run by this rank alone (as `if rank == 0: evaluate()` does), slow per batch."""
    net = model.module if isinstance(model, DDP) else model
    log.info("running validation: %d batches of %d", batches, batch)
    correct = total = 0
    t0 = time.time()
    with torch.no_grad():
        for b in range(batches):
            xs, ys = zip(*(data[(b * batch + i) % len(data)] for i in range(batch)))
            pred = net(torch.stack(xs)).argmax(1)
            correct += int((pred == torch.tensor(ys)).sum())
            total += batch
            time.sleep(0.15)  # per-batch metric work (decoding, writing predictions) that takes a while
            if (b + 1) % 20 == 0:
                log.info("validation batch %d/%d acc %.3f elapsed %.1fs", b + 1, batches, correct / total,
                         time.time() - t0)
    log.info("validation done: acc %.4f in %.1fs", correct / total, time.time() - t0)


@record
def main() -> None:
    args = parse()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.dump_stacks_on_sigterm:
        faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    print(f"rank {rank}/{world} (local {local_rank}) pid {os.getpid()} backend {dist.get_backend()} "
          f"torch {torch.__version__}", flush=True)
    torch.manual_seed(0)
    faulty = rank == args.fault_rank

    length = world * args.batch * (args.steps + 4)
    sampler = DistributedSampler(range(length), num_replicas=world, rank=rank, shuffle=True, seed=7)
    order = list(iter(sampler))
    stall = order[args.fault_step * args.batch] if args.fault == "stall" and faulty else None
    if args.shard_dir:
        global SHARD
        SHARD = 4
        os.makedirs(args.shard_dir, exist_ok=True)
    data = ShardedSynthetic(length, stall_index=stall, shard_dir=args.shard_dir)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=7)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler, num_workers=args.workers, drop_last=True)

    if args.grad_sync == "ddp":
        model = DDP(MLP())
    else:  # plain data parallelism by hand: same initial weights, gradients averaged with one all_reduce each
        model = MLP()
        for p in model.parameters():
            dist.broadcast(p.data, src=0)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        log.info("model MLP(%d-64-64-%d) params=%d world_size=%d batch/rank=%d steps=%d", FEATURES, CLASSES, n, world,
                 args.batch, args.steps)

    if args.fault == "nofile" and faulty:  # stands for the node's `ulimit -n` (set here so it lasts ~S steps)
        in_use = len(os.listdir("/proc/self/fd"))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + args.batch * args.fault_step, hard))
    cache: list[torch.Tensor] = []
    sampler.set_epoch(0)
    t_prev = time.time()
    for step, (x, y) in enumerate(loader):
        if step >= args.steps:
            break
        if args.fault == "kill" and faulty and step == args.fault_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if args.fault == "raise" and faulty and step == args.fault_step:
            x = x[:, : FEATURES - 4]  # the feature-dropping augmentation path forgets to pad back
        if args.fault == "oom" and faulty and step == args.fault_step:
            cap_address_space(args.oom_headroom_mb)
        if args.fault == "nan" and step == args.fault_step:
            for g in opt.param_groups:
                g["lr"] = args.lr * 1e8

        out = model(x)
        loss = lossf(out, y)
        if not torch.isfinite(loss).all():
            raise FloatingPointError(f"Loss became infinite or NaN at iteration={step}!\n"
                                     f"loss_dict = {{'loss_cls': {loss.item()}}}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_sync == "manual":
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
        if args.fault == "oom" and faulty and step >= args.fault_step:
            cache.append(out.detach().new_ones(64 * 2**20))  # 256 MiB per step, never released

        if args.fault == "slow_eval" and faulty and step == args.fault_step:
            evaluate(model, data, args.batch)
        reported = loss.detach().clone()
        if not (args.fault == "skip_collective" and faulty and step == args.fault_step):
            dist.all_reduce(reported)
            reported /= world
        now = time.time()
        log.info("step %d loss %.4f lr %.3g rss_mb %d step_ms %.0f", step, reported.item(),
                 opt.param_groups[0]["lr"], rss_mb(), (now - t_prev) * 1000)
        t_prev = now

    dist.barrier()
    if rank == 0:
        log.info("training finished: %d steps", args.steps)
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
