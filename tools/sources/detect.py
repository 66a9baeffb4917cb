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

ALL_KINDS = frozenset({SLURM, TORCHRUN, RANK_LOG, NEMO, MEGATRON, DEEPSPEED, AIS_TARGET, AIS_PROXY,
                       CLOUD_LOGGING, KERNEL, NVIDIA_SMI, PYSPY, FR_DUMP, GENERIC})
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
    return [ln for ln in re.split(r"\r\n|\r|\n", text) if ln.strip()]


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
    text = _ANSI.sub("", head.decode("utf-8", "replace"))
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
    if _PYSPY_NAME.search(name):
        return PYSPY
    return GENERIC
