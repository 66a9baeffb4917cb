"""DeepSpeed: the fp16 loss scaler and the launcher (deepspeed/runtime/fp16/loss_scaler.py, deepspeed/launcher).

Real lines (DeepSpeed 0.9-0.16):
    [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
    Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.
    [launch.py:319:sigkill_handler] Killing subprocess 41223
    [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=1'] exits with return code = -7
    [launch.py:351:main] Process 48213 exits successfully.
An OVERFLOW skip is dynamic loss scaling doing its job (noise, however many); only the scaler giving up is the
run's numerical failure.
"""

import re

from trainlog_debugger.tools.sources.declare import Detector, Head, has
from trainlog_debugger.tools.sources.pattern import P

# what a step-down note says: the scale before (`from X`, `Attempted loss scale: X`) and after (`to Y`, `reducing to Y`)
_STEP_DOWN = (r"(?:from |Attempted loss scale: )(?P<prev>[0-9][0-9.]*(?:[eE][-+]?\d+)?),? (?:reducing )?to "
              r"(?P<scale>[0-9][0-9.]*(?:[eE][-+]?\d+)?)")

PATTERNS = [
    P("deepspeed.overflow_skip", 2, "numerical", "noise",
      r"OVERFLOW! Rank \d+ Skipping step", "OVERFLOW! Rank",
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
      "fp16 overflow: the step was skipped and the loss scale lowered (handled)",
      fields=_STEP_DOWN),
    # the fp16 optimizers' own step-down notes (deepspeed/runtime/fp16/fused_optimizer.py and unfused_optimizer.py:
    # `fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: {cur}, reducing to {next}`,
    # `Reducing dynamic loss scale from {prev} to {cur}`): noise one by one; a scale that no longer goes down (from 1
    # to 1: pinned at min_loss_scale, every step skipped) is read by tools/rules/data.loss_scale_collapse
    P("deepspeed.fp16_step_down", 2, "numerical", "noise",
      r"Reducing dynamic loss scale from [0-9]|dynamic loss scale overflow! Skipping step",
      ("Reducing dynamic loss scale from", "dynamic loss scale overflow! Skipping step"),
      "[2025-02-11 03:12:55,021] [INFO] [fused_optimizer.py:393:step] Reducing dynamic loss scale from 1.0 to 1.0",
      "fp16 overflow: the optimizer skipped the step and lowered its loss scale (handled)", fields=_STEP_DOWN),
    P("deepspeed.loss_scale_min", 2, "numerical", "root_candidate",
      r"loss scale already at minimum", "loss scale already at minimum",
      "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
      "fp16 loss scale collapsed to its minimum: the gradients stay non-finite", weight=0.85,
      advice="find the step where the loss first overflowed; lower the learning rate, clip gradients, or train in bf16"),
    P("deepspeed.launcher_kill", 1, None, "cascade",
      r"sigkill_handler\] Killing subprocess", "Killing subprocess",
      "[2024-05-02 10:11:12,345] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 41223",
      "DeepSpeed's launcher killed its workers after one failed"),
    # launch.py sigkill_handler once the launcher itself was signalled: `Main process received {SIGTERM|SIGINT},
    # exiting` is printed only when no worker had failed before (a worker's failure calls the same handler with its
    # return code set, which exits after `exits with return code` instead): the stop came from outside (the scheduler,
    # an operator, pdsh's Ctrl-C), as torchrun's `Received 15 death signal` (tools/rules/scheduler.death_signal)
    P("deepspeed.launcher_signalled", 1, None, "context",
      r"Main process received SIG[A-Z]{2,8}, exiting", "Main process received SIG",
      "[2025-01-27 10:32:12,062] [INFO] [launch.py:328:sigkill_handler] Main process received SIGTERM, exiting",
      "DeepSpeed's launcher itself was signalled and stops its workers", fields=r"received (?P<signal>SIG[A-Z]{2,8}),"),
    # launch.py sigkill_handler: `logger.error(f"{cmd} exits with return code = {last_return_code}")`; a negative
    # code is the signal that ended the rank (Popen's convention): -9 SIGKILL, -7 SIGBUS, -11 SIGSEGV, -6 SIGABRT.
    # `cmd` is left from the handler's loop over every process launched: the argv it prints is the last one
    # launched, not the one that exited, so no rank is read from it (tools.rules.infra.launcher_ranks)
    P("deepspeed.exit_code", 1, None, "cascade",
      r"exits with return code = -?\d", "exits with return code = ",
      "[2024-05-02 10:11:12,345] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
      "'--local_rank=1'] exits with return code = -7",
      "a rank launched by DeepSpeed's launcher exited: its return code (a signal when negative)",
      fields=r"exits with return code = (?P<returncode>-?\d+)", ints=("returncode",)),
    # the launcher's own account of each process it started (launch.py main: `process {pid} spawned with command:`
    # once per local rank, then, in its poll loop, `Process {pid} exits successfully.` for each that returned 0; the
    # first non-zero return goes to sigkill_handler instead). Every spawned process of a node reporting exit 0 is
    # that node's normal end, as torchrun's `worker group successfully finished` is (RuleInputs.finished)
    P("deepspeed.proc_spawned", 0, None, "context",
      r"\] process \d+ spawned with command: ", "spawned with command: ",
      "[2025-03-04 09:12:33,518] [INFO] [launch.py:256:main] process 48213 spawned with command: ['/usr/bin/python3', "
      "'-u', 'train.py', '--local_rank=0']",
      "DeepSpeed's launcher started a local rank", fields=r"process (?P<pid>\d+) spawned", ints=("pid",)),
    P("deepspeed.proc_ok", 0, None, "context",
      r"\] Process \d+ exits successfully\.", "exits successfully.",
      "[2025-02-21 12:05:41,123] [INFO] [launch.py:351:main] Process 48213 exits successfully.",
      "a local rank started by DeepSpeed's launcher exited 0", fields=r"Process (?P<pid>\d+) exits", ints=("pid",)),
    # runtime/utils.py see_memory_usage (DeepSpeed 0.3-0.16, and the copies of it in Megatron-DeepSpeed and many
    # training scripts): `CPU Virtual Memory:  used = {used_GB} GB, percent = {vm_stats.percent}%`, psutil's share of
    # host memory not available. A fact, no failure: a worker SIGKILLed after a reading near 100 % is the kernel's OOM
    # kill whose own line the bundle lacks (tools/rules/oom.host_memory_full)
    P("deepspeed.host_memory", 0, None, "context",
      r"CPU Virtual Memory: +used = [0-9.]+ GB, percent = [0-9.]+%", "CPU Virtual Memory:",
      "[2024-07-24 02:13:16,632] [INFO] [utils.py:789:see_memory_usage] CPU Virtual Memory:  used = 17.18 GB, "
      "percent = 6.8%",
      "host memory in use, as DeepSpeed's see_memory_usage reads it (psutil)",
      fields=r"used = (?P<used_gb>[0-9.]{1,12}) GB, percent = (?P<percent>[0-9.]{1,8})%"),
]

# every process of a node is counted against its exit (a node of 16 GPUs prints 16 of each)
KEEP_FIRST = {"deepspeed.proc_spawned": 256, "deepspeed.proc_ok": 256}


# ---- detection: DeepSpeed's logger (`[INFO] [engine.py:1234:__init__]`) and its launcher's lines
DEEPSPEED = "deepspeed"
KINDS = {DEEPSPEED: "worker"}
_LOGGER = re.compile(r"\[(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\] \[[\w.]+\.py:\d+:\w+\]")
_LAUNCH = re.compile(r"\[(?:INFO|WARNING|ERROR)\] \[(?:launch|runner|launcher_helper)\.py:\d+")


def _lines(h: Head) -> str | None:
    if has(_LAUNCH, h.text, "] [") or (has(_LOGGER, h.text, "] [") and "deepspeed" in h.text.lower()):
        return DEEPSPEED
    return None


DETECT = (Detector("framing", 30, _lines, ("train.log", b"[INFO] [launch.py:146:main] WORLD INFO DICT: {'localhost': [0, 1]}\n")),)
