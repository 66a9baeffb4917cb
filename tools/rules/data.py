"""Numerics and data: NaN/Inf losses, corrupt or unreadable samples, exhausted iterators."""

from __future__ import annotations

import re

from trainlog_debugger.tools.rules.base import RuleInputs, candidate

_ITER = re.compile(r"iteration[ =]+(\d+)")


def nan_loss(f: RuleInputs):
    evs = f.hits("numerical.nan_loss", "numerical.grad_nan")
    if not evs:
        return []
    m = _ITER.search(evs[0].text)
    early = m is not None and int(m.group(1)) <= 10
    recs = (["NaN from the first iterations points at initialisation or input data: check uninitialised parameters "
             "(torch.empty/torch.Tensor without init) and the first batches"] if early else
            ["lower the learning rate or enable gradient clipping; check for bad samples around that step; bf16 "
             "instead of fp16 if the loss scale collapsed"])
    return [candidate("numerical.nan", "numerical", "the loss became NaN/Inf" + (" at the very start" if early else ""),
                 0.8, evs[:3], f, ranks=[], recommendations=recs)]


def corrupt_data(f: RuleInputs):
    evs = f.hits("loader.audio_error")
    out = [candidate("data.corrupt_sample", "data", "samples failed to load (corrupt or unreadable data)", 0.55, evs[:3], f,
                recommendations=["find the failing paths in these lines and validate those shards"])] if evs else []
    stop = f.hits("python.stop_iteration")
    if stop:
        out.append(candidate("data.iterator_exhausted", "data", "a data iterator ran out (StopIteration)", 0.5, stop[:2], f,
                        recommendations=["check the dataset size / sampler length per rank"]))
    killed = [e for e in f.hits("loader.worker_killed") if "Killed" not in e.text]
    if killed:
        out.append(candidate("data.loader_worker_died", "data", "a DataLoader worker process died", 0.5, killed[:2], f))
    return out


RULES = [nan_loss, corrupt_data]
