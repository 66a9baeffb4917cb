"""DeepSpeed: the fp16 loss scaler and the launcher (deepspeed/runtime/fp16/loss_scaler.py, deepspeed/launcher).

Real lines (DeepSpeed 0.9-0.16):
    [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768
    Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.
    [launch.py:319:sigkill_handler] Killing subprocess 41223
    [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=1'] exits with return code = -7
An OVERFLOW skip is dynamic loss scaling doing its job (noise, however many); only the scaler giving up is the
run's numerical failure.
"""

import re

from trainlog_debugger.tools.sources.declare import Detector, Head, has
from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
    P("deepspeed.overflow_skip", 2, "numerical", "noise",
      r"OVERFLOW! Rank \d+ Skipping step", "OVERFLOW! Rank",
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
      "fp16 overflow: the step was skipped and the loss scale lowered (handled)",
      fields=r"reducing to (?P<scale>[0-9][0-9.]*(?:[eE][-+]?\d+)?)"),
    P("deepspeed.loss_scale_min", 2, "numerical", "root_candidate",
      r"loss scale already at minimum", "loss scale already at minimum",
      "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
      "fp16 loss scale collapsed to its minimum: the gradients stay non-finite", weight=0.85,
      advice="find the step where the loss first overflowed; lower the learning rate, clip gradients, or train in bf16"),
    P("deepspeed.launcher_kill", 1, None, "cascade",
      r"sigkill_handler\] Killing subprocess", "Killing subprocess",
      "[2024-05-02 10:11:12,345] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 41223",
      "DeepSpeed's launcher killed its workers after one failed"),
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
]


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
