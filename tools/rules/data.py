"""Numerics and data: NaN/Inf losses, a loss curve that diverged, corrupt or unreadable samples, exhausted iterators."""

from __future__ import annotations

import re

from trainlog_debugger.tools.rules.base import HANDLED_STRENGTH, RuleInputs, candidate
from trainlog_debugger.tools.rules.infra import memory_killed

_ITER = re.compile(r"iteration[ =]+(\d+)")


def nan_loss(f: RuleInputs):
    evs = f.hits("numerical.nan_loss", "numerical.grad_nan")
    if not evs:
        return []
    loss = f.hits("numerical.nan_loss")
    if not loss and (f.finished() or f.hits("job.training_done")):
        return []  # non-finite gradients in a run that then ended normally: overflows the loss scaler skipped
    m = _ITER.search(evs[0].text)
    early = m is not None and int(m.group(1)) <= 10
    recs = (["NaN from the first iterations points at initialisation or input data: check uninitialised parameters "
             "(torch.empty/torch.Tensor without init) and the first batches"] if early else
            ["lower the learning rate or enable gradient clipping; check for bad samples around that step; bf16 "
             "instead of fp16 if the loss scale collapsed"])
    what = "the loss became NaN/Inf" if loss else "the gradients became NaN/Inf"
    return [candidate("numerical.nan", "numerical", what + (" at the very start" if early else ""),
                 0.8, evs[:3], f, ranks=[], recommendations=recs)]


def corrupt_data(f: RuleInputs):
    evs = f.hits("loader.audio_error")
    # lhotse's fault-tolerant mode (utils.py suppress_and_warn: `[Suppressed AudioLoadingError] Error message: ...`)
    # caught the error, skipped the sample and went on: named, never an end of the job by itself
    raised = [e for e in evs if "[Suppressed " not in e.text]
    out = [candidate("data.corrupt_sample", "data", "samples failed to load (corrupt or unreadable data)" if raised else
                     "samples failed to load and were skipped (suppressed by the loader's fault-tolerant mode)",
                     0.55 if raised else HANDLED_STRENGTH, (raised or evs)[:3], f,
                     recommendations=["find the failing paths in these lines and validate those shards"])] if evs else []
    stop = f.hits("python.stop_iteration")
    if stop:
        out.append(candidate("data.iterator_exhausted", "data", "a data iterator ran out (StopIteration)", 0.5, stop[:2], f,
                        recommendations=["check the dataset size / sampler length per rank"]))
    return out


# How a DataLoader worker ended, by the signal PyTorch names (torch/csrc/DataLoader.cpp: `is killed by signal: %s`,
# strsignal's words): a native crash is the code's (a decoder, an extension, CUDA after fork), a bus error the
# container's shared memory (infra.bus_error reads it), a SIGKILL something outside: memory only with memory evidence
# (TAXONOMY: a SIGKILL with none is infrastructure, and the answer says the evidence is missing; tools/rules/oom.host_oom
# reads it with the kernel's, a cgroup's or the scheduler's kill line). No signal at all (`exited unexpectedly`):
# the worker died of its sample's own error, the data's
NATIVE_CRASH = ("Segmentation fault", "Illegal instruction", "Floating point exception", "Aborted")


def loader_worker_died(f: RuleInputs):
    evs = f.hits("loader.worker_killed")
    if not evs:
        return []
    signal = {id(e): (f.fields_of(e, "loader.worker_killed").get("signal") or "").strip() for e in evs}
    crashed = [e for e in evs if signal[id(e)].startswith(NATIVE_CRASH)]
    if crashed:
        return [candidate("software.loader_worker_crash", "software", f"a DataLoader worker crashed in native code "
                          f"({signal[id(crashed[0])]}): a decoder or extension library, or CUDA used before the fork",
                          0.6, crashed[:2], f, recommendations=[
                              "rerun with num_workers=0 (or python -X faulthandler) to get the native frame; check "
                              "decoder and extension versions, and whether the dataset touches CUDA or threads before "
                              "the workers fork"])]
    killed = [e for e in evs if signal[id(e)] == "Killed"]
    if killed:
        if memory_killed(f):
            return []  # oom.host_oom: the kill line names the killer
        return [candidate("infra.loader_worker_killed", "infrastructure", "a DataLoader worker was killed with SIGKILL "
                          "and no line shows why: killed from outside the process (the host's OOM killer is the usual "
                          "one, but no memory evidence is in the bundle)", 0.6, killed[:2], f, recommendations=[
                              "check the host's kernel log for the OOM killer or a cgroup limit at that time (dmesg / "
                              "journalctl -k, memory.events): with it this is memory (lower num_workers and "
                              "prefetch_factor), without it find who killed the process"])]
    died = [e for e in evs if not signal[id(e)]]
    if died:
        return [candidate("data.loader_worker_died", "data", "a DataLoader worker process died", 0.5, died[:2], f)]
    return []


def loader_stall_in_dumps(f: RuleInputs):
    """Stack dumps of a hung job where a thread waits on the DataLoader's queue while others sit inside collectives:
    that process never reached the collective the others wait in (protocol step 3, read from stacks instead of the
    watchdog). A loader wait with no collective anywhere proves less (a data-bound job looks the same at any
    instant), so it stays weak."""
    waits = f.hits("pyspy.loader_wait")
    if not waits:
        return []
    others = f.hits("pyspy.in_collective") or f.hits("pytorch.watchdog_timeout")
    files = sorted({e.file for e in waits})
    summary = (f"a stack dump shows a process stuck waiting for its next DataLoader batch ({', '.join(files[:3])})"
               + (" while other processes wait inside collectives" if others else ""))
    # the stuck process's rank: its dump's (the stacks stage maps a dump's pid to its rank through NCCL's init
    # lines), else the wait line's own; never the collective line cited beside it, which is a rank that waited
    at = {(e.file, e.line) for e in waits}
    ranks = sorted({st.rank for st in f.stacks if st.rank is not None
                    and any((ev.file, ev.line) in at for _fn, _w, ev in st.frames)}
                   or {e.rank for e in waits if e.rank is not None})
    return [candidate("data.loader_stall_in_dumps", "data_loading_stall", summary, 0.7 if others else 0.45,
                      waits[:2] + others[:1], f, status="hung", ranks=ranks,
                      recommendations=["set num_workers=0 for the failing loader (eval loaders included) to confirm, then "
                                       "look for a worker that deadlocks at start (fork after threads, a lock held in "
                                       "the dataset)", "give data reads a timeout so a stuck read fails loudly"])]


SCALE_DOWN = ("numerical.loss_scale_down", "deepspeed.overflow_skip",  # the scalers' step-down lines, with `scale`
              "deepspeed.fp16_step_down")
COLLAPSED_BELOW = 1.0  # a scale under 1 scales the loss DOWN: it overflows fp16 even unscaled
PINNED = 3  # step-downs that left the scale where it was (at the scaler's floor): every step overflows and is skipped


def loss_scale_collapse(f: RuleInputs):
    """The dynamic fp16 loss scaler (fairseq, apex/Megatron, DeepSpeed) halves its scale on each overflow, from 2^15
    or more; a scale driven below 1 means the loss overflows fp16 even when scaled down: the loss is exploding, and
    the scaler is about to give up (fairseq's `Minimum loss scale reached`, DeepSpeed's `loss scale already at
    minimum`). A paste that stops there shows the divergence but not the end: numerical, as a lead (inconclusive),
    unless the run then ended normally. Single overflow notes at ordinary scales are the scaler doing its job."""
    if f.finished():
        return []
    notes = [(e, v) for e in f.hits(*SCALE_DOWN) if (v := _scale(f, e)) is not None]
    if not notes:
        return []
    pinned = [e for e, v in notes if _scale(f, e, "prev") == v]
    if notes[-1][1] >= COLLAPSED_BELOW and len(pinned) < PINNED:
        return []
    (first, _), (last, value) = notes[0], notes[-1]
    steps = f.count(*SCALE_DOWN)  # every step-down line, not only the kept ones (repeats are counted, not kept)
    what = (f"the fp16 loss scale is pinned at its floor ({value:g}): the step-downs leave it where it was, so every "
            f"step overflows and is skipped ({steps} overflow step-down(s)); the loss is exploding"
            if value >= COLLAPSED_BELOW else
            f"the fp16 loss scale fell to {value:g} after {steps} overflow step-down(s): the loss overflows even "
            "scaled down, it is exploding (the scaler stops the run at its minimum)")
    return [candidate("numerical.loss_scale_collapse", "numerical", what, 0.45,
                      [first, last] if first is not last else [last], f, ranks=[],
                      facts={"loss_scale": value, "step_downs": steps},
                      recommendations=["find where the loss and grad norm started to climb (the iterations before the "
                                       "first overflow): lower the learning rate, clip gradients, or train in bf16",
                                       "check the batch settings against the recipe (tokens per batch, update "
                                       "frequency): a much larger effective batch changes the stable learning rate"])]


def _scale(f: RuleInputs, e, field: str = "scale") -> float | None:
    """The scale a step-down line reports (`field`: after it, or `prev`, before it), bounded (a float parse of a
    log's text sizes nothing, but is checked)."""
    for pid in SCALE_DOWN:
        raw = f.fields_of(e, pid).get(field)
        if raw:
            try:
                v = float(raw)
            except ValueError:
                return None
            return v if 0 <= v < 1e40 else None
    return None


def loss_divergence(f: RuleInputs):
    """The loss curve the step lines print diverged before the log ends (tools/steps/divergence.py: a level shift
    up that never came back, a collapse to exactly 0, a non-finite value). Read only when nothing else found a
    fault (the steps stage runs then): a run that diverged often prints no error, and is stopped by a person or by
    its loss scaler much later. A lead, not a proof: the log does not say why the run stopped."""
    rep = f.steps
    dv = rep.divergence if rep is not None else None
    if dv is None or not dv.evidence:
        return []
    rise = dv.kind == "rise"
    return [candidate("numerical.loss_divergence", "numerical", dv.summary(), 0.45, dv.evidence, f,
                      status="inconclusive", facts={"kind": dv.kind, "iteration": dv.iteration, "before": dv.before,
                                                    "after": dv.after, "grad_norm_before": dv.grad_norm_before,
                                                    "grad_norm_after": dv.grad_norm_after},
                      recommendations=[
                          f"restart from the last checkpoint before iteration {dv.iteration}" + (
                              " and skip the batches around the spike (Megatron/DeepSpeed: data skip), or lower the "
                              "learning rate" if rise else ", in bf16 or with a lower learning rate"),
                          "look at the grad norm and loss scale in the iterations before the onset: a grad norm that "
                          "climbs first points at the learning rate or an unstable layer, a single bad batch at the "
                          "data"])]


RULES = [nan_loss, corrupt_data, loader_worker_died, loader_stall_in_dumps, loss_scale_collapse, loss_divergence]
