"""A tiny real PyTorch Lightning job (CPU, DDP over gloo) with injectable faults, for eval/lab/run_lab.py.

Run it under torchrun (Lightning reads torchrun's environment and does not spawn processes itself):

    python -m torch.distributed.run --nproc_per_node=4 eval/lab/train_lightning.py --fault corrupt --fault-rank 2

The same MLP and synthetic sharded data as train.py, in a LightningModule and a DataLoader with 2 worker processes;
Lightning's own logging, progress off (a job log, not a terminal). Faults:

- `corrupt`: rank K's dataset stores its records as JSON text, and the record it reads at step S is truncated (a
  partially written shard); `json.loads` raises inside `Dataset.__getitem__` in a DataLoader worker, and PyTorch
  re-raises it in the main process as `Caught JSONDecodeError in DataLoader worker process N`.
- `nan`: from step S the learning rate is multiplied by 1e8 on every rank; Lightning's EarlyStopping with
  `check_finite=True` stops the run when the monitored loss is not finite.
- `corrupt_image`: rank K's dataset stores each sample as a small PNG (the 32 features as an 8x4 grayscale
  image) and decodes it with Pillow; the record it reads at step S is truncated, so Pillow raises inside
  `Dataset.__getitem__` in a DataLoader worker.
- `nan_anomaly`: the same learning-rate jump as `nan`, with `Trainer(detect_anomaly=True)`: autograd's anomaly
  mode raises `Function '...Backward0' returned nan values` in the backward pass on every rank.
- `none`: the run finishes normally (`Trainer.fit` stopped: `max_steps=N` reached).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os

import lightning as L
import torch
import torch.nn as nn
from lightning.pytorch.callbacks import EarlyStopping
from torch.utils.data import DataLoader, Dataset, DistributedSampler

FEATURES, CLASSES = 32, 8


class JsonRecords(Dataset):
    """Samples kept as JSON text records (as a JSONL shard holds them); record `bad` is cut short."""

    def __init__(self, length: int, bad: int | None):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(length, FEATURES, generator=g)
        self.y = torch.randint(0, CLASSES, (length,), generator=g)
        self.bad = bad

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        text = json.dumps({"x": self.x[i].tolist(), "y": int(self.y[i])})
        if i == self.bad:
            text = text[: len(text) // 2]  # a partially written record
        rec = json.loads(text)
        return torch.tensor(rec["x"]), torch.tensor(rec["y"])


class PngRecords(JsonRecords):
    """Samples kept as PNG images (8x4, 8-bit grayscale), decoded with Pillow; record `bad` is cut short."""

    def __getitem__(self, i: int):
        from PIL import Image

        img = Image.frombytes("L", (8, 4), bytes(((self.x[i].clamp(-3, 3) + 3) * 42).to(torch.uint8).tolist()))
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        data = buf.getvalue()
        if i == self.bad:
            data = data[: len(data) // 2]  # a partially written image
        pix = Image.open(io.BytesIO(data)).convert("L")
        x = torch.tensor(list(pix.getdata()), dtype=torch.float32) / 42 - 3
        return x, torch.tensor(int(self.y[i]))


class Net(L.LightningModule):
    def __init__(self, lr: float, nan_step: int | None):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, CLASSES))
        self.lr, self.nan_step = lr, nan_step

    def training_step(self, batch, idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.nan_step is not None and self.global_step >= self.nan_step:
            for g in self.optimizers().param_groups:
                g["lr"] = self.lr * 1e8
        self.log("train_loss", loss, sync_dist=True)
        if self.global_step % 5 == 0:
            logging.getLogger("train").info("step %d loss %.4f", self.global_step, loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--fault", choices=["none", "corrupt", "nan", "corrupt_image", "nan_anomaly"], default="none")
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=10)
    a, _ = p.parse_known_args()
    if a.fault in ("corrupt", "corrupt_image"):
        a.fault_step %= 8
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    batch = 16
    bad = None
    if a.fault in ("corrupt", "corrupt_image") and rank == a.fault_rank:
        bad = a.fault_step * batch * world + rank  # the first sample rank r reads at step S
    ds = (PngRecords if a.fault == "corrupt_image" else JsonRecords)(batch * world * 8, bad)  # 8 steps an epoch: EarlyStopping checks at each epoch's end
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)  # rank r reads r, r+W, r+2W, ...
    loader = DataLoader(ds, batch_size=batch, num_workers=2, sampler=sampler)
    callbacks = [EarlyStopping("train_loss", check_finite=True, patience=1000, verbose=True)] if a.fault == "nan" else []
    anomaly = a.fault == "nan_anomaly"  # kept off the lines a traceback shows
    model = Net(0.05, a.fault_step if a.fault in ("nan", "nan_anomaly") else None)
    trainer = L.Trainer(accelerator="cpu", devices=int(os.environ.get("LOCAL_WORLD_SIZE", 1)), strategy="ddp",
                        num_nodes=int(os.environ.get("GROUP_WORLD_SIZE", 1)), max_steps=a.steps,
                        enable_progress_bar=False, enable_checkpointing=False, logger=False, callbacks=callbacks,
                        use_distributed_sampler=False, log_every_n_steps=1, detect_anomaly=anomaly)
    trainer.fit(model, loader)


if __name__ == "__main__":
    main()
