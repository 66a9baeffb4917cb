"""A tiny real Hugging Face `transformers.Trainer` job (CPU, DDP over gloo), for eval/lab/run_lab.py.

Run it under torchrun (the Trainer, through Accelerate, reads torchrun's environment):

    python -m torch.distributed.run --nproc_per_node=4 eval/lab/train_hf.py --steps 30 --out /tmp/trainlab/out

A small MLP classifier (a plain `nn.Module` that returns `{"loss", "logits"}`, as a `PreTrainedModel` does) on
synthetic data, `TrainingArguments(use_cpu=True, ddp_backend="gloo")`, checkpoints every --save-steps steps into
--out, Python logging at INFO (the Trainer's own `***** Running training *****` lines) and the Trainer's printed log
dicts. Nothing is downloaded. Faults are made outside the program (run_lab.py): `--out` on a small, nearly full
filesystem makes the checkpoint write fail with a real ENOSPC.
"""

from __future__ import annotations

import argparse
import logging
import os

import torch
import torch.nn as nn
import transformers
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments

FEATURES, HIDDEN, CLASSES = 32, 256, 8


class Synthetic(Dataset):
    def __init__(self, n: int):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, FEATURES, generator=g)
        self.y = (self.x @ torch.randn(FEATURES, CLASSES, generator=g)).argmax(1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i]}


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                                 nn.Linear(HIDDEN, CLASSES))

    def forward(self, x, labels=None):
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--save-steps", type=int, default=10)
    p.add_argument("--out", required=True)
    p.add_argument("--fault", default="none")  # run_lab.py passes these to every worker script; unused here
    p.add_argument("--fault-rank", type=int, default=-1)
    p.add_argument("--fault-step", type=int, default=10)
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    transformers.logging.set_verbosity_info()
    torch.set_num_threads(1)
    args = TrainingArguments(
        output_dir=a.out, use_cpu=True, ddp_backend="gloo", ddp_timeout=20, max_steps=a.steps,
        per_device_train_batch_size=16, learning_rate=1e-3, logging_steps=5, save_strategy="steps",
        save_steps=a.save_steps, report_to="none", disable_tqdm=True, dataloader_num_workers=0, seed=0,
        log_level="info", log_level_replica="warning")
    world = int(os.environ.get("WORLD_SIZE", 1))
    trainer = Trainer(model=Classifier(), args=args, train_dataset=Synthetic(16 * world * (a.steps + 2)))
    trainer.train()
    if args.process_index == 0:
        logging.getLogger("train").info("training finished: %d steps", a.steps)
    trainer.accelerator.wait_for_everyone()  # every rank done with its checkpoint files before the group goes
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
