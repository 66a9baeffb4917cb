"""Guess what produced a log file, from its name AND its first ~8 KiB.

Why both: users rename files (`combined.log`, `node3.txt`), paste several tools into one file, and
archive tools flatten directories, so an extension says little. Content that identifies a whole
file (a flight-recorder dump, a Cloud Logging export, a py-spy dump, an AIStore log, a dmesg dump)
beats any name. For training-process output the *launcher's file layout* (torchrun `attempt_N/`,
SLURM `slurm-<job>.out`, NeMo `nemo_log_globalrank-*`) is the most reliable framing (it tells the
parsers which rank/node wrote the file), then framework content, then weak name hints, then
'generic' (still scanned). Formats: ../shared/FORMATS.md. Never unpickles or evaluates anything.
"""
from __future__ import annotations

import re

from trainlog_debugger.tools.sources.flight_recorder.format import is_fr_dump

SLURM, TORCHRUN, RANK_LOG, NEMO, MEGATRON, DEEPSPEED = (
    "slurm", "torchrun", "rank_log", "nemo", "megatron", "deepspeed")
AIS_TARGET, AIS_PROXY, CLOUD_LOGGING, KERNEL, NVIDIA_SMI, PYSPY, FR_DUMP, GENERIC = (
    "ais_target", "ais_proxy", "cloud_logging", "kernel", "nvidia_smi", "pyspy", "fr_dump", "generic")
# hardware and fabric snapshots (tools/hw): read as records, compared across nodes
GPU_TOPO, IB_STATUS, IB_COUNTERS, NCCL_TESTS, DCGM_DIAG = ("gpu_topo", "ib_status", "ib_counters", "nccl_tests",
                                                           "dcgm_diag")
HW_KINDS = frozenset({NVIDIA_SMI, GPU_TOPO, IB_STATUS, IB_COUNTERS, NCCL_TESTS, DCGM_DIAG})

ALL_KINDS = frozenset({SLURM, TORCHRUN, RANK_LOG, NEMO, MEGATRON, DEEPSPEED, AIS_TARGET, AIS_PROXY,
                       CLOUD_LOGGING, KERNEL, NVIDIA_SMI, PYSPY, FR_DUMP, GENERIC}) | HW_KINDS
#: Kinds whose text is (or wraps) the training processes' own stdout/stderr, i.e. where rank-level
#: failures are expected. 'generic' is included because real pastes (`combined.log`) mostly are that.
WORKER_KINDS = frozenset({SLURM, TORCHRUN, RANK_LOG, NEMO, MEGATRON, DEEPSPEED, CLOUD_LOGGING, GENERIC})

HEAD_BYTES = 8192
_COMPRESSED_SUFFIX = re.compile(r"\.(?:gz|bz2|xz|zst)$", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_M = re.M

# ---- whole-file formats -------------------------------------------------------------------------
_CLOUD_PAYLOAD = re.compile(r'"(?:textPayload|jsonPayload|protoPayload)"\s*:')
_CLOUD_META = re.compile(r'"(?:resource|logName|timestamp|insertId|receiveTimestamp)"\s*:')
_PYSPY_THREAD = re.compile(r'^Thread (?:\d+|0X[0-9A-F]+) \((?:idle|active|active\+gil|gil)\)', _M)
_PYSPY_JSON = re.compile(r'"os_thread_id"\s*:.*?"frames"|"frames"\s*:.*?"os_thread_id"', re.S)
_AIS_START = re.compile(r"^(?:Started up|Rotated) at \d{4}/\d\d/\d\d \d\d:\d\d:\d\d, host ", _M)
_AIS_NODE = re.compile(r"^Node ([tp])\[[^\]\s]+\], Version", _M)
_AIS_NAME = re.compile(r"^ais(target|proxy|node)[.-]", re.I)

# ---- kernel ---------------------------------------------------------------------------------------
_KERNEL_LINE = re.compile(
    r"^(?:\[\s*\d+\.\d+\] "                                              # dmesg
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] "    # dmesg -T
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: "                # syslog / journalctl
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* \S+ kernel: "                   # journalctl -o short-iso
    r"|NVRM: |nvidia-nvswitch\d+: SXid )")
_SYSLOG_LINE = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.()/-]+(?:\[\d+\])?: ")
_KERNEL_NAME = re.compile(r"^(?:dmesg|kern\.log|syslog|messages|journalctl)", re.I)

# ---- launchers / frameworks -------------------------------------------------------------------------
_TORCHRUN_PATH = re.compile(r"(?:^|/)attempt_\d+/\d+/(?:stderr\.log|stdout\.log|error\.json)$")
_NEMO_NAME = re.compile(r"^(?:nemo_log_globalrank-\d+_localrank-\d+|nemo_error_log|lightning_logs)\.txt$")
_SLURM_NAME = re.compile(
    r"^(?:slurm-\d+\S*|(?:error|output|err|out|stderr|stdout)[-_]\d+(?:[-_.]\w+)*\.(?:out|err|log)"
    r"|[\w.-]*?\d{4,}(?:[-_.]\d+)*\.(?:out|err))$", re.I)
_RANK_NAME = re.compile(r"(?:^|[/_.-])rank[_-]?\d+(?:[_.-][\w-]+)*\.(?:log|txt|out|err)$", re.I)
_NVSMI_NAME = re.compile(r"nvidia[-_]?smi", re.I)
_PYSPY_NAME = re.compile(r"py-?spy", re.I)
_HW_NAMES = ((re.compile(r"topo", re.I), GPU_TOPO), (re.compile(r"ibstat|ibv_devinfo|ibv-devinfo", re.I), IB_STATUS),
             (re.compile(r"perfquery", re.I), IB_COUNTERS),
             (re.compile(r"nccl[-_]?tests?|(?:all_reduce|all_gather|reduce_scatter|alltoall|sendrecv)_perf", re.I),
              NCCL_TESTS), (re.compile(r"dcgm", re.I), DCGM_DIAG))

_NEMO = re.compile(r"\[NeMo [IWEDC] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d |"
                   r"^(?:Training|Validation) epoch \d+, iteration \d+/\d+ \|", _M)
_MEGATRON = re.compile(r" iteration\s+\d+/\s*\d+ \| consumed samples:")
_DS_LOGGER = re.compile(r"\[(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\] \[[\w.]+\.py:\d+:\w+\]")
_DS_LAUNCH = re.compile(r"\[(?:INFO|WARNING|ERROR)\] \[(?:launch|runner|launcher_helper)\.py:\d+")
_TORCHRUN = re.compile(r"torch[./]distributed[./](?:elastic|run\b)|ChildFailedError|"
                       r"torch/distributed/run\.py:\d+\]")
_SLURM = re.compile(r"^(?:\s*\d+: )?(?:slurmstepd(?:-[\w.-]+)?|srun): ", _M)
_PREFIXES = r"(?:\s{0,8}\d{1,6}: |[\w.-]{1,64}: |\[[a-z_]{0,32}\d{1,6}\]:){0,3}"  # srun/pdsh/tee tags
_RANK_LINE = re.compile(_PREFIXES + r"\[rank\d+\]:")
_TEE_LINE = re.compile(r"(?:\s{0,8}\d{1,6}: |[\w.-]{1,64}: ){0,2}\[[a-z_]{1,32}\d{1,6}\]:")  # [default3]:
_NVSMI = re.compile(r"NVIDIA-SMI \d+\.\d+|=+NVSMI LOG=+|Driver Version\s*:.*CUDA Version", re.S)


def _lines(text: str) -> list[str]:
    """Physical lines, with tqdm `\\r` redraws split out and blanks dropped."""
    # str methods, not re.split(r"\r\n|\r|\n"): the same pieces at a tenth of the cost (100 µs a head, 0.4 s of
    # opening a 4,096-file bundle)
    return [ln for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if ln.strip()]


def _share(pattern: re.Pattern, lines: list[str], text: str = "", token: str = "") -> float:
    """Fraction of lines that start with `pattern`; 0 at once when `token` is absent from `text`."""
    if not lines or (token and token not in text):
        return 0.0
    return sum(1 for ln in lines if pattern.match(ln)) / len(lines)


def _has(pattern: re.Pattern, text: str, *tokens: str) -> bool:
    """pattern.search, skipped when no token is in text: `in` is ~100x cheaper than a regex scan,
    and big folders mean thousands of heads."""
    return any(t in text for t in tokens) and pattern.search(text) is not None


def sniff(rel: str, head: bytes) -> str:
    """Return the source kind for display path `rel` (archive members as `a.tgz!x/y.log`) whose
    (decompressed) content starts with `head`. Cheap: regexes over at most HEAD_BYTES bytes."""
    head = head[:HEAD_BYTES]
    path = _COMPRESSED_SUFFIX.sub("", rel.replace("\\", "/").replace("!", "/"))
    name = path.rsplit("/", 1)[-1]
    text = head.decode("utf-8", "replace")
    text = _ANSI.sub("", text) if "\x1b" in text else text
    lines = _lines(text)

    # 1. Self-identifying whole-file formats: content wins over any name.
    if is_fr_dump(name, head, text):
        return FR_DUMP
    if text.lstrip("\ufeff \t\r\n")[:1] in ("[", "{"):
        if _CLOUD_PAYLOAD.search(text) and len(set(_CLOUD_META.findall(text))) >= 2:
            return CLOUD_LOGGING
        if _PYSPY_JSON.search(text):
            return PYSPY
    if _has(_PYSPY_THREAD, text, "Thread "):          # `Thread N (active+gil): ...` is py-spy's own shape
        return PYSPY
    node = _AIS_NODE.search(text) if "Node " in text else None
    if node or _has(_AIS_START, text, "Started up at", "Rotated at"):
        if node:
            return AIS_TARGET if node.group(1) == "t" else AIS_PROXY
        return AIS_PROXY if name.lower().startswith("aisproxy") else AIS_TARGET
    kernel = _share(_KERNEL_LINE, lines)
    if kernel >= 0.5 or (kernel and kernel + _share(_SYSLOG_LINE, lines) >= 0.6):
        return KERNEL
    hw = _hardware(text, lines)  # a snapshot that starts as its tool starts, whatever it is called (slurm-N.out too)
    if hw:
        return hw

    # 2. Launcher file layout: says which rank/node wrote the file, whatever the framework.
    if _TORCHRUN_PATH.search(path):
        return TORCHRUN
    if _NEMO_NAME.match(name):
        return NEMO
    if _SLURM_NAME.match(name):
        return SLURM

    # 3. Framework content, most specific first.
    if _has(_NEMO, text, "[NeMo ", " epoch "):
        return NEMO
    if _has(_MEGATRON, text, "consumed samples"):
        return MEGATRON
    if _has(_DS_LAUNCH, text, "] [") or (_has(_DS_LOGGER, text, "] [") and "deepspeed" in text.lower()):
        return DEEPSPEED
    if _share(_RANK_LINE, lines, text, "[rank") >= 0.5:
        return RANK_LOG
    if _has(_TORCHRUN, text, "torch", "ChildFailedError") or _share(_TEE_LINE, lines, text, "]:") >= 0.5:
        return TORCHRUN
    if _has(_SLURM, text, "srun: ", "slurmstepd"):
        return SLURM
    if _has(_NVSMI, text, "NVIDIA-SMI", "NVSMI LOG", "Driver Version"):
        return NVIDIA_SMI

    # 4. Weak name hints (content was not decisive).
    if _RANK_NAME.search(name):
        return RANK_LOG
    ais = _AIS_NAME.match(name)
    if ais:
        return AIS_PROXY if ais.group(1).lower() == "proxy" else AIS_TARGET
    if _KERNEL_NAME.match(name):
        return KERNEL
    if _NVSMI_NAME.search(name):
        return NVIDIA_SMI
    for rx, kind in _HW_NAMES:
        if rx.search(name):
            return kind
    if _PYSPY_NAME.search(name):
        return PYSPY
    return GENERIC


def _hardware(text: str, lines: list[str]) -> str | None:
    """The snapshot kind of a head whose first line is a hardware tool's first line. `nvidia-smi -q` is left to the
    NVIDIA_SMI content check below the launchers: prolog scripts print it at the top of workers' logs."""
    if not lines or not _HW_START.match(lines[0]):
        return None
    kind = hardware_kind(text)
    return kind if kind != NVIDIA_SMI else None


# what each tool's output contains wherever it starts (tools/hw parses it): the test that recognises a snapshot by
# content, shared by sniff() and the snapshot reader, most specific first
HW_CONTENT = (
    (DCGM_DIAG, re.compile(r"^\|\s*Diagnostic\s+\|\s*Result\s+\|", _M)),
    (NCCL_TESTS, re.compile(r"^#\s*Avg bus bandwidth\s*:|^# nThread \d+ nGpus \d+ minBytes", _M)),
    (IB_COUNTERS, re.compile(r"^# Port (?:extended )?counters: ", _M)),
    (IB_STATUS, re.compile(r"^CA '[^'\n]+'\s*\n(?:\s.*\n){0,40}?\s+Port \d+:|^hca_id:\s*\S+", _M)),
    (GPU_TOPO, re.compile(r"^\s*(?:\x1b\[[0-9;]*m)?\s*GPU0\s+GPU1\b[^\n]*\n(?:\x1b\[[0-9;]*m)?GPU0\s+X\b", _M)),
    (NVIDIA_SMI, re.compile(r"=+NVSMI LOG=+|^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*\n\s+\S[^\n]*: ", _M)),
)
_HW_START = re.compile(r"\s*(?:(?:\x1b\[[0-9;]*m)?\s*GPU0\s|CA '|hca_id:|# Port (?:extended )?counters:|# nThread \d|"
                       r"Successfully ran diagnostic|\+-{20,}\+-{20,}\+|\|\s*Diagnostic\s+\|)")


def hardware_kind(text: str) -> str | None:
    """The hardware snapshot kind whose content test `text` passes (HW_CONTENT), None when none does."""
    return next((kind for kind, rx in HW_CONTENT if rx.search(text)), None)
