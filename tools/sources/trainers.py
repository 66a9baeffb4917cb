"""Trainer loops that stop on a non-finite value: Megatron-LM, PyTorch Lightning, JAX (TAXONOMY `numerical`).

Real lines:
    Rank 3: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: 3, node: gpu-07
    Rank 0: found NaN in local forward loss calculation. Device: 0, node: gpu-01
    Monitored metric val_loss = nan is not finite. Previous best value was 0.412. Signaling Trainer to stop.
    FloatingPointError: invalid value (nan) encountered in jit(train_step)
(Megatron-core `training.py`/`optimizer` checks, Lightning's EarlyStopping(check_finite=True), JAX's
`jax_debug_nans`.) The first rank and step where the value went non-finite is the trigger.
"""

import re

from trainlog_debugger.tools.sources.declare import Detector, has
from trainlog_debugger.tools.sources.pattern import P

NAN_ADVICE = ("find the first step where the value went non-finite (loss spike, a bad batch, a learning-rate "
              "jump); lower the learning rate or clip gradients, and check the batches of that step")

PATTERNS = [
    P("megatron.found_nan", 2, "numerical", "root_candidate",
      r"found NaN in local (?:grad norm|forward loss)", "found NaN in local",
      "Rank 3: found NaN in local grad norm in backward pass before data-parallel communication collective. "
      "Device: 3, node: gpu-07",
      "Megatron found a NaN (grad norm or forward loss) on a rank",
      fields=r"Rank (?P<nan_rank>\d+): found NaN.*?(?:node: (?P<host>\S+))?$", ints=("nan_rank",),
      weight=0.85, advice=NAN_ADVICE),
    # Megatron-core's rerun state machine (megatron/core/rerun_state_machine.py, log_failure: `Rank R, node N, device
    # D, iteration #I: <what>!`; core 0.10-0.12 print no iteration: `Rank R, node N, device D: <what>!`) re-runs a step whose result was rejected (a NaN, a spike), first on the same GPU,
    # then from a checkpoint on another one, and says what it found: the verdict explains the NaN line before it
    # (tools/rules/gpu.rerun_verdict). `First rerun: ... is reproducible` names the GPU a later `persistent` blames.
    P("megatron.rerun_verdict", 2, None, "root_candidate",
      r"device \d+(?:, iteration #\d+)?: (?:Possible (?:transient|persistent) error|Correct result \(but possible "
      r"Application error\))",
      ("Possible transient error", "Possible persistent error", "Correct result (but possible Application error)"),
      "ERROR:megatron.core.rerun_state_machine:Rank 12, node node-0042, device 4, iteration #1201: Possible transient "
      "error!!",
      "Megatron's rerun of a rejected step gave its verdict (transient or persistent GPU fault, or a real result)",
      fields=r"Rank (?P<rerun_rank>\d+), node (?P<host>\S+), device (?P<device>\d+)(?:, iteration #(?P<iteration>\d+))?: "
             r"(?:Possible (?P<verdict>transient|persistent) error|(?P<correct>Correct result))",
      ints=("rerun_rank", "device", "iteration")),
    P("megatron.rerun_reproducible", 2, None, "context",
      r"iteration #\d+: First rerun: unexpected result is reproducible within", "First rerun: unexpected result is reproducible",
      "ERROR:megatron.core.rerun_state_machine:Rank 12, node node-0042, device 4, iteration #1201: First rerun: "
      "unexpected result is reproducible within the tolerance (nan = nan). Need to rerun on a different GPU to verify "
      "correctness.!",
      "Megatron's in-place rerun reproduced the rejected result on this GPU (a second rerun elsewhere decides)",
      fields=r"Rank (?P<rerun_rank>\d+), node (?P<host>\S+), device (?P<device>\d+), iteration #(?P<iteration>\d+):",
      ints=("rerun_rank", "device", "iteration")),
    # Lightning's SLURM auto-requeue (src/lightning/pytorch/trainer/connectors/signal_connector.py): SLURM's warning
    # signal before the time limit arrived, Lightning saved an HPC checkpoint and requeued the job, and this
    # allocation ends here. The scheduler ended the run, not a fault of the job (its `Requeuing ... failed` is a table
    # trigger of its own); below the specific readings, which a later allocation's own failure would give
    P("lightning.slurm_requeue", 1, "infrastructure", "root_candidate",
      r"Handling auto-requeue signal: \d", "Handling auto-requeue signal",
      "Handling auto-requeue signal: 10",
      "SLURM's time-limit warning signal: Lightning saved an HPC checkpoint and requeued the job", weight=0.7,
      status="cancelled", advice="check that the requeued job started and resumed from its HPC checkpoint "
                                 "(`squeue -j <job>`, hpc_ckpt_*.ckpt); raise --time if each allocation does little"),
    P("lightning.not_finite", 2, "numerical", "root_candidate",
      r"Monitored metric \S+ = (?:nan|inf|-inf) is not finite", "is not finite",
      "Monitored metric val_loss = nan is not finite. Previous best value was 0.412. Signaling Trainer to stop.",
      "Lightning stopped the run: a monitored metric is not finite", weight=0.8, advice=NAN_ADVICE),
    # The dynamic fp16 loss scalers' step-down notes: fairseq (fairseq/trainer.py: `NOTE: overflow detected, ` + the
    # scaler's `setting loss scale to: X`) and apex amp (`Gradient overflow.  Skipping step, loss scaler 0 reducing
    # loss scale to X`; Megatron-LM's legacy fp16 path prints the same). One is the scaler doing its job (noise); the
    # scale they reach is read by tools/rules/data.loss_scale_collapse (DeepSpeed's OVERFLOW line: deepspeed.py).
    P("numerical.loss_scale_down", 2, "numerical", "noise",
      r"(?:overflow detected, setting loss scale to|reducing loss scale to):? ?[0-9]",
      ("setting loss scale to", "reducing loss scale to"),
      "2020-03-23 11:41:18 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.00048828125",
      "fp16 overflow: the loss scaler lowered its scale (handled)",
      fields=r"(?:setting loss scale to|reducing loss scale to):? ?(?P<scale>[0-9][0-9.]*(?:[eE][-+]?\d+)?)"),
    P("jax.debug_nans", 2, "numerical", "root_candidate",
      r"FloatingPointError: invalid value \((?:nan|inf)\) encountered in", "invalid value (",
      "FloatingPointError: invalid value (nan) encountered in jit(train_step)",
      "JAX's NaN checker stopped the run (jax_debug_nans)", weight=0.85, advice=NAN_ADVICE),
]


# ---- detection: NeMo's per-rank log files and its logger's lines; Megatron's iteration lines
NEMO, MEGATRON = "nemo", "megatron"
KINDS = {NEMO: "worker", MEGATRON: "worker"}
_NEMO_NAME = re.compile(r"^(?:nemo_log_globalrank-\d+_localrank-\d+|nemo_error_log|lightning_logs)\.txt$")
_NEMO = re.compile(r"\[NeMo [IWEDC] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d |"
                   r"^(?:Training|Validation) epoch \d+, iteration \d+/\d+ \|", re.M)
_MEGATRON = re.compile(r" iteration\s+\d+/\s*\d+ \| consumed samples:")
DETECT = (Detector("layout", 20, lambda h: NEMO if _NEMO_NAME.match(h.name) else None,
                   ("nemo_log_globalrank-3_localrank-3.txt", b"hello\n")),
          Detector("framing", 10, lambda h: NEMO if has(_NEMO, h.text, "[NeMo ", " epoch ") else None,
                   ("train.log", b"[NeMo I 2024-08-21 19:17:52 exp_manager:396] Experiments are logged at /results\n")),
          Detector("framing", 20, lambda h: MEGATRON if has(_MEGATRON, h.text, "consumed samples") else None,
                   ("train.log", b" iteration      100/  500000 | consumed samples:        12800 | lm loss: 2.1\n")))
