"""What step-time lines look like: the compiled bytes patterns the reader runs over whole buffers.

Formats read, real shapes (FORMATS.md §7.2, §7.3); prefixes (`[rank3]:`, srun ` 3: `, `[default3]:`) are allowed::

    Megatron training line (printed by the LAST rank only: the whole job's step time, not a per-rank one)
     [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 412.3 | ...
    Megatron timers (megatron/core/timers.py, after the iteration line): `--timing-log-option all` is PER RANK
    times across ranks (ms):
      forward-compute:
         rank  5: 1680.12
    (min, max) time across ranks (ms):                         max time across ranks (ms):
        forward-backward ..............................: (1180.20, 1650.71)      optimizer ........: 102.33
    NeMo 2 progress printer
    Training epoch 0, iteration 10/99 | lr: 1e-05 | global_batch_size: 8 | global_step: 10 | reduced_train_loss: 9.47 | train_step_timing in s: 0.5
    Lightning / NeMo 1 progress bar (tqdm, `\\r`-separated updates)
    Epoch 0: 100%|██| 10/10 [00:05<00:00, 1.9it/s, v_num=0, reduced_train_loss=9.47, global_step=9.000, train_step_timing in s=0.512]
    generic: `step 120 | loss 2.31 | time 0.523s`, `[step 40/1000] loss=2.1 1.93 s/it`, `step: 10 ... tps: 6,234 tflops: 120.3 mfu: 38.6%`
    training loss and grad norm: Megatron's `| lm loss: 7.267764E+00 | ... | grad norm: 3273877.676 |`, the HF
    Trainer's `{'loss': 2.3164, 'grad_norm': 1.52, ...}`, NeMo's `reduced_train_loss=9.47`

Why each pattern begins with a literal (`iteration `, ` across ranks (ms):`, `train_step_timing in s`, `tep`): sre's
literal-prefix scan then does the walking at GB/s and Python runs per MATCH only (tools/steps/parse.py).
"""

from __future__ import annotations

import re
from datetime import date

NAN = float("nan")

MEGATRON_LINE = re.compile(
    rb"iteration  *(\d{1,12})/ *\d{1,12} \|(?:[^|\n]*\|)*? elapsed time per iteration \(ms\): ([0-9.]{1,24})")
TIMER_HEADER = re.compile(rb" across ranks \(ms\):")
TRAIN_STEP = re.compile(rb"train_step_timing in s(?:=|: ?)([0-9.]+(?:[eE][-+]?[0-9]+)?)")
# 'step N': the 's' is checked by hand, so that the pattern keeps its literal prefix
GENERIC_STEP = re.compile(rb"tep[ :=#\[]{0,3}(\d{1,12})(?:/\d+)?")  # digits bounded: int() of 5,000 raises
GLOBAL_STEP = re.compile(rb"global_step[=:] ?(\d{1,12})")
ITERATION_IN = re.compile(rb"iteration (\d{1,12})/|(\d{1,12})/\d+ \[")
GENERIC_TIME = re.compile(
    rb"(?i)(?:\b(?:step[_ ]?time|iter(?:ation)?[_ ]?time|time(?:/step|_per_step)?|elapsed)"
    rb"(?P<u1> ?\((?:ms|s)\)|_ms|_s)? ?[:=]? ?(?P<t>\d+(?:\.\d+)?) ?(?P<u>ms|s|sec|secs|seconds)?\b"
    rb"|(?P<spi>\d+(?:\.\d+)?) ?s/it\b|(?P<ips>\d+(?:\.\d+)?) ?it/s\b|(?P<mspi>\d+(?:\.\d+)?) ?ms/(?:it|step|iter)\b)")
GENERIC_THROUGHPUT = [
    ("tokens_per_s", re.compile(rb"(?i)\b(?:tps|tok(?:en)?s?/s(?:ec)?|tokens?_per_s(?:ec(?:ond)?)?)"
                                rb" ?[:=]? ?(\d[\d,]*(?:\.\d+)?)|(\d[\d,]*(?:\.\d+)?) ?tok(?:en)?s?/s(?:ec)?\b")),
    ("tflops", re.compile(rb"(?i)\btflop(?:s|/s)(?:/gpu)? ?[:=]? ?(\d[\d,]*(?:\.\d+)?)")),
    ("mfu", re.compile(rb"(?i)\bmfu(?:\(%\))? ?[:=]? ?(\d+(?:\.\d+)?)"))]
# Training metrics (the loss and the gradient norm), read beside the step times: whether the math diverged before
# the log ends (tools/steps/divergence.py). A number as the trainers print it (`7.267764E+00`, `0.0`), or non-finite.
_NUM = rb"([-+]?(?:\d{1,12}(?:\.\d{0,16})?|\.\d{1,16})(?:[eE][-+]?\d{1,3})?|[-+]?(?:nan|inf)\b)"
# Megatron-LM's training_log (`iteration N/ M | ... | lm loss: 7.267764E+00 | loss scale: 65536.0 | grad norm:
# 3273877.676 | ...`): (the key, the metric) in line order, each found by bytes.find inside the iteration-line loop
# (tools/steps/parse.py: _megatron): the first `<name> loss:` key (`lm loss`; `loss scale:` is not one), then the grad
# norm after it; each value runs to the next space and is read by float() (`7.267764E+00`, `nan`, `inf`)
MEGATRON_TRAINING = ((b" loss: ", "loss"), (b"| grad norm: ", "grad_norm"))
# The HF Trainer's logged dict (Trainer.log on the main process): `{'loss': 2.3164, 'grad_norm': 1.52, 'learning_rate':
# 1e-05, 'epoch': 0.01}`; no step in it: points are numbered in file order.
HF_LOSS = re.compile(rb"\{'loss': " + _NUM + rb"(?:, 'grad_norm': " + _NUM + rb")?")
# NeMo / Lightning progress lines: `reduced_train_loss=9.47` (bar) or `reduced_train_loss: 9.47` (NeMo 2 printer).
NEMO_LOSS = re.compile(rb"reduced_train_loss(?:=|: ?)" + _NUM)
STAMP = re.compile(rb"(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d(?:[.,]\d+)?)")
RANK_LABEL = re.compile(rb"\[rank(\d{1,6})\]")  # at most 6 digits: below tools.ranks.MAX_RANKS
SRUN_LABEL = re.compile(rb" {0,6}(\d{1,7}): (?!\[[A-Za-z_]\w*?\d+\]:)")
WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")

# Megatron timer blocks. Each block line may carry the wrappers launchers add (c10 [rankN]:, srun label,
# torchrun role, a logger's ISO time).
LINE_PREFIX = rb"(?:\[rank\d+\]: ?|\[[A-Za-z_]\w*?\d+\]:| {0,6}\d{1,7}: |\d{4}-\d\d-\d\d[ T][\d:.,]+ ?)*"
BLOCK = {"all": re.compile(rb"(?:" + LINE_PREFIX + rb" *(?:rank +\d+: [0-9.]+|\w[\w\-./]*:)\r?\n)+"),
         "minmax": re.compile(rb"(?:" + LINE_PREFIX + rb" *\w[\w\-./]* \.*: \([0-9.]+, [0-9.]+\)\r?\n)+"),
         "max": re.compile(rb"(?:" + LINE_PREFIX + rb" *\w[\w\-./]* \.*: [0-9.]+\r?\n)+")}
TIMER_LINE = {"minmax": re.compile(rb"(\w[\w\-./]*) \.*: \(([0-9.]+), ([0-9.]+)\)"),
              "max": re.compile(rb"(\w[\w\-./]*) \.*: ([0-9.]+)\r?\n")}
ALL_NAME = re.compile(rb":\r?\n")
ALL_RANK = re.compile(rb"rank +(\d{1,6}): ([0-9.]+)")
KINDS = ((b"(min, max) time", "minmax"), (b"max time", "max"), (b"times", "all"))
KIND_TITLE = {"all": "times across ranks", "minmax": "(min, max) time across ranks", "max": "max time across ranks"}

# Job facts: the layout that decides which ranks do the same work.
WORLD = re.compile(rb"using world size: (\d{1,7})\b|world_size \.{3,} (\d{1,7})\b|world[_ ]size[:=] ?(\d{1,7})\b")
PIPELINE = re.compile(rb"pipeline[-_ ]model[-_ ]parallel[-_ ]size(?: \.{3,} |: ?|=)(\d{1,7})\b")

_DAYS: dict[bytes, int] = {}


def epoch(m: re.Match) -> float:
    """POSIX seconds of a STAMP match, read as if UTC (the zone is unknown: only differences are used). Not
    tools.lines.timestamps.parse_stamp: this runs once per step line on the hot path, so it caches the day and slices."""
    d = _DAYS.get(m.group(1))
    if d is None:
        try:
            d = (date.fromisoformat(m.group(1).decode()).toordinal() - 719163) * 86400
        except ValueError:
            d = -1
        _DAYS[m.group(1)] = d
    if d < 0:
        return NAN
    return d + int(m.group(2)) * 3600 + int(m.group(3)) * 60 + float(m.group(4).replace(b",", b"."))
