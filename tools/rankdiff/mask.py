"""Line → template for the rank diff (tools.rankdiff.analyze): digits zeroed, launcher wrappers stripped, named masks applied.

Real lines and their templates::

    [rank3]:[I1105 12:00:03.123456789 train.py:10] step 3 loss 2.31  → [I<TS> train.py:<NUM>] step <NUM> loss <NUM>
    ' 3: [rank3]:[E1105 ...] [Rank 3] Watchdog caught ... SeqNum=5'  → [E<TS> ...] [Rank <NUM>] Watchdog caught ...
                                                                       SeqNum=<NUM>
    node23:12098:12141 [2] NCCL INFO comm 0x55d0c4a0 busId 1b000     → <HOST>:<NUM>:<NUM> [<NUM>] NCCL INFO comm <HEX>
                                                                       busId <HEX>

Masks, Drain3-style and in this order: <UUID>; <TS> (ISO date-time, glog `I1105 12:00:00.1`, syslog
`Nov  5 12:00:00`, bare `12:00:00.5`); <HOST> (the host of NCCL's `host:pid:tid` header); <IP> (v4, v6 with `::`);
<PATH> (absolute, `./`, `~/`); <HEX> (`0x..`, PCI `0000:1b:00`, a 5+ hex-char word with a digit and a letter);
<NUM> (digit runs with decimals and exponents, inside words too: `node<NUM>`); `|<BAR>|` (tqdm). Whitespace runs
become one space; ANSI colours, srun ` N: `, torchrun `[roleN]:`, elastic `[N]:` and c10 `[rankN]:` labels are
stripped; of a `\r` progress line only the text after the last `\r` counts; templates are cut at 1024 bytes.

Why the masks run on a digit-ZEROED line (`line.translate(ZERO)`): the rank diff zeroes whole buffers with one
C-level `bytes.translate` and caches templates per distinct zeroed line; the zeroed key keeps every non-digit byte,
so the template is a function of the key (`template_of_key`), and `template_of(line)` and the buffer path agree by
construction.
"""

from __future__ import annotations

import re
from trainlog_debugger.tools.lines.ansi import ANSI_BYTES as _ANSI

__all__ = ["template_of", "template_of_key", "ZERO", "RANK_LABEL0", "MAX_TEMPLATE_BYTES"]

MAX_TEMPLATE_BYTES = 1024

ZERO = bytes.maketrans(b"123456789", b"000000000")
# wrappers at the start: srun ' 3: ', torchrun '[default3]:', elastic '[12]:' (zeroed digits)
_PREFIX = re.compile(rb"^(?: {0,6}0{1,7}: )?(?:\[[A-Za-z_][A-Za-z_]*0+\]:|\[0+\]:(?=.*\S))*")
RANK_LABEL0 = re.compile(rb"\[rank0+\]: ?")      # a c10 label, digits zeroed
_MONTH = rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_MASKS: list[tuple[re.Pattern, bytes]] = [
    (re.compile(rb"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}(?![0-9A-Za-z])"), b"<UUID>"),
    (re.compile(rb"0000-00-00(?:[T ]00:00:00(?:[.,]0+)?(?:Z|[+-]00:?00)?)?"
                rb"|" + _MONTH + rb" {1,2}0{1,2} 00:00:00(?:\.0+)?"
                rb"|(?<=[IWEF])0{3,4} 00:00:00(?:\.0+)?"
                rb"|(?<![\w:])00:00:00(?:[.,]0+)?"), b"<TS>"),
    (re.compile(rb"^(\[[^\]]*\] )?[^\s:\[\]]+(?=:0+:0+ (?:\[0+\] )?(?:\S+ ){0,3}NCCL )"), rb"\1<HOST>"),
    (re.compile(rb"(?<![\w.])0{1,3}(?:\.0{1,3}){3}(?!\.?\w)"
                rb"|(?<![\w:.])(?=[0-9a-f:]*::)[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?:%\w+)?(?![\w:.])"), b"<IP>"),
    (re.compile(rb"(?<![\w.:/~-])(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)*"), b"<PATH>"),
    (re.compile(rb"0[xX][0-9a-fA-F]+|(?<!\w)[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?(?![\w:])"
                rb"|(?<![\w.-])(?=[0-9a-fA-F]*[a-fA-F])(?=[a-fA-F]*0)[0-9a-fA-F]{5,}(?![\w.-])"),
     b"<HEX>"),
    (re.compile(rb"0+(?:\.0+)*(?:[eE][-+]?0+)?"), b"<NUM>"),
    (re.compile(rb"(?<=%)\|[^|]*\|"), b"|<BAR>|"),
    (re.compile(rb"[ \t]+"), b" "),
]


_REDACTOR: list = []


def _secrets_out(k: bytes) -> bytes:
    """The line with its secrets redacted BEFORE the masks run (issue 30): masking first turned `AKIA…7EXAMPLE` into
    `AKIA…<NUM>EXAMPLE` and `ghp_…` into pieces the redactor no longer knew, so templates (`diff`, the agent's
    rank_diff) carried the keys out. Digits are zeroed already; a zeroed secret still has its shape."""
    if not _REDACTOR:
        from trainlog_debugger.tools.redact import Redactor
        _REDACTOR.append(Redactor())
    s = k.decode("utf-8", "surrogateescape")
    out = _REDACTOR[0].redact(s)
    return k if out == s else out.encode("utf-8", "surrogateescape")


def template_of_key(key: bytes) -> str:
    """Template of a digit-zeroed line (no '\\n'). Pure function of `key`: see the module docstring."""
    k = key.rstrip(b"\r")
    if b"\x1b" in k:
        k = _ANSI.sub(b"", k)
    k = _PREFIX.sub(b"", k, count=1)
    if b"\r" in k:                       # tqdm: the terminal shows only what follows the last '\r'
        k = _PREFIX.sub(b"", k[k.rfind(b"\r") + 1:], count=1)
    if len(k) > MAX_TEMPLATE_BYTES:
        k = k[:MAX_TEMPLATE_BYTES]
    if b"[rank" in k:
        k = RANK_LABEL0.sub(b"", k)
    k = _secrets_out(k)
    for rx, rep in _MASKS:
        k = rx.sub(rep, k)
    return k.strip().decode("utf-8", "replace")


def template_of(line: bytes | str) -> str:
    """The template of one raw log line ('' for an empty or blank line): digits zeroed, wrappers stripped, named
    masks applied, exactly as tools.rankdiff.analyze does over whole buffers."""
    b = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else bytes(line)
    if b.endswith(b"\n"):
        b = b[:-1]
    return template_of_key(b.replace(b"\n", b" ").translate(ZERO))
