"""Attribute one raw log line to a rank and a node (a file's path: tools/sources/paths.py).

Why: a distributed job's logs interleave many ranks and hosts, and every root-cause claim must
say *who* said it.  The launch stack wraps each physical line in prefixes, outermost first
(FORMATS.md §0), e.g. (real shapes)::

    ' 3: [rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog ...'  srun --label
    '[default2]:[rank2]:[E808 04:21:41.161045406 ProcessGroupNCCL.cpp:2147] [PG ID 0 ...'     torchrun --tee
    '10.3.0.41: [rank22]: Traceback (most recent call last):'                                  pdsh
    '[1,6]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate ...'                     mpirun --tag-output
    '(RayWorkerWrapper pid=270291, ip=10.175.94.190) INFO ...'                                 Ray
    'node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN ...'                               NCCL

Two kinds of prefix, treated differently:
* *wrapper layers* added by launchers/loggers around someone else's line (srun label, pdsh node,
  torchrun role, elastic template, Ray actor, c10 ``[rankN]:`` / excepthook ``[rankN]: ``) are
  **stripped**: ``strip_prefixes`` returns the text that an emitter-specific parser expects;
* *emitter headers* (c10 ``[E1105 ... File.cpp:N]``, ``[PG ... Rank r]``, NCCL
  ``host:pid:tid [dev]``, ``[NeMo I ... rank:3]``) are only **read**: the parsers of those formats
  anchor on them (FORMATS §1.1, §3.1), so they stay in the body.

Every number these regexes capture is bounded in the regex itself (ranks and tasks 1-7 digits, pids 1-10): a
`[rank<5,000 digits>]:` is not a rank prefix at all, so no caller ever converts or sizes anything with it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from trainlog_debugger.tools.lines.memo import remember
from trainlog_debugger.tools.lines.ansi import ANSI as _ANSI

__all__ = ["Attribution", "attribute_line", "c10_headed", "strip_prefixes"]


@dataclass(frozen=True, slots=True)
class Attribution:
    rank: int | None = None  # GLOBAL rank
    local_rank: int | None = None
    node: str | None = None  # hostname / IP / pdsh node name / NCCL host token
    pg_rank: int | None = None  # rank within a process group ('[PG ... Rank r]' / '[Rank r]')
    body: int = 0  # index in the original line where the message starts after stripped wrappers
    styles: tuple[str, ...] = ()  # prefix styles seen, outermost first
    cuda_dev: int | None = None  # NCCL '[cudaDev]': a LOCAL device index, never a rank


_EMPTY = Attribution()

# One wrapper layer at the current position; applied repeatedly (outer -> inner).
_WRAP = re.compile(
    r"\[rank(?P<rank>\d{1,7})\]: ?"  # c10 '[rank3]:[E..' / excepthook '[rank3]: ' (one space)
    r"|\[(?P<tmpl>\d{1,7})\]:(?=.*\S)"  # TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE '[12]:' (not a bare '[1]:')
    # Open MPI's --tag-output '[1,3]<stderr>:' (orte iof_base_output.c, prte in 5.x: '[jobid,rank]<stream>:') and
    # horovodrun's '[3]<stderr>:' (horovod/runner/common/util/safe_shell_exec.py): the world rank
    r"|\[(?:\d{1,10},)?(?P<mpi>\d{1,7})\]<(?:stdout|stderr|stddiag)>: ?"
    r"|\[(?P<tee_name>[A-Za-z_]\w*?)(?P<lrank>\d{1,7})\]:"  # torchrun --tee '[default3]:', '[trainer12]:'
    r"|(?:P(?P<het>\d{1,7}) )?(?P<pad> *)(?P<task>\d{1,7}): "  # srun --label ' 3: ', '15: ', het 'P1  3: '
    r"|\((?:(?P<cls>[A-Za-z_][\w.]*)(?:\[rank=(?P<rrank>\d{1,7})\])?(?: pid=(?P<pid>\d{1,10}))?"
    r"(?:, ip=(?P<ip>[\w.:\-]+))?|pid=(?P<pid2>\d{1,10})(?:, ip=(?P<ip2>[\w.:\-]+))?)\) ?"  # Ray actor
    r"|slurmstepd-(?P<sdnode>[\w.\-]+): "  # MULTIPLE_SLURMD builds: 'slurmstepd-{node}: error: ...'
    r"|(?P<host>[A-Za-z0-9][A-Za-z0-9.\-]*): "  # pdsh / DeepSpeed 'worker-1: ' (validated below)
)
# tqdm glues headers mid-line: 'Epoch 10/10: 240it [05:55, ...][rank0]:[E709 17:05:38...'.
_RANK_ANY = re.compile(r"\[rank(\d{1,7})\]:(?:(?=\[)| |$)")
_CAMEL = re.compile(r"[a-z][A-Z]")
_DIGIT = re.compile(r"\d")
_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)")
# Tokens shaped like 'word<digits>' that are metrics/devices/versions, not pdsh hosts.
_NOT_HOST = re.compile(
    r"(?i)(?:fp|bf|int|uint|float|top|sha|md|utf|cuda|cudnn|python|py|torch|nccl|rank|local[_-]?rank|"
    r"epoch|step|iter|iteration|layer|block|loss|lr|v|x|gpu|cpu|dev|device|ib|eth|en[ops]?|mlx\d*_?|"
    r"stage|phase|round|test|case|run|trial|batch|sample|part|tp|pp|dp|ep|cp|sm|node[_-]?rank|"
    r"worker[_-]?rank|task|job|pid|tid|id|attempt|restart)[-_]?[\d.]+[a-z]?"
)
_PG = re.compile(
    r"\[(?:PG (?:ID (?P<id>\d+) PG GUID (?P<guid>[^ (\]]+)|GUID (?P<guid2>[^ (\]]+)|(?P<uid>[^ (\]]+))"
    r"(?: ?\((?P<desc>[^)]*)\))? )?Rank (?P<r>\d{1,7})\]"
)
_NEMO = re.compile(r"\[NeMo [A-Z] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+:\d+ rank:(\d{1,7})\]")
# '{host}:{pid}:{tid} [{cudaDev}] ... NCCL INFO', optional v2.26+ '[ts] ' before it (FORMATS §3.1).
_NCCL = re.compile(
    r"(?:\[[^\]]*\] )?(?P<host>[^\s:\[\]]+):\d+:\d+ (?:\[(?P<dev>\d{1,4})\] )?"
    r"(?=(?:\S+ ){0,3}NCCL )"
)
# Rank sources, best first: explicit c10 '[rankN]:' > elastic template > srun task id > Ray
# actor '[rank=N]' > NeMo 'rank:N' > PG/legacy '[Rank r]' (conditional, see _scan).
_P_RANK, _P_TMPL, _P_SRUN, _P_RAY, _P_NEMO, _P_PG = range(6)


def _hostish(tok: str) -> bool:
    """pdsh node token?  Conservative: a false node is worse than none.

    Accepts IPv4 ('10.3.0.41') and dot-free names with a letter *and* a digit ('node2',
    'worker-1', 'H100-5', 'tpgds-aihub0007').  Rejects exception names ('RuntimeError'),
    dotted module names ('torch.distributed.DistBackendError'), 'WARNING', 'srun', 'fp16',
    'gpu0', camelCase model names ('ResNet50'), ALL-CAPS words without '-' ('GPT2').
    """
    if tok[0].isdigit():
        return _IPV4.fullmatch(tok) is not None
    if "." in tok or tok.endswith(("Error", "Exception", "Warning")) or not _DIGIT.search(tok):
        return False
    if _NOT_HOST.fullmatch(tok):
        return False
    if not tok.islower() and ("-" not in tok or _CAMEL.search(tok)):
        return False
    return True


def _clean(line: str) -> tuple[str, list[int] | None]:
    """Drop ANSI colour escapes (to a fixpoint, so stripping stays idempotent) and trailing
    CR/LF; return the text plus a map back to original indices (None = identity)."""
    idx = None
    if "\x1b" in line and _ANSI.search(line):
        idx = list(range(len(line)))
        while True:
            spans = [m.span() for m in _ANSI.finditer(line)]
            if not spans:
                break
            keep: list[str] = []
            kidx: list[int] = []
            last = 0
            for a, b in spans:
                keep.append(line[last:a])
                kidx.extend(idx[last:a])
                last = b
            keep.append(line[last:])
            kidx.extend(idx[last:])
            line, idx = "".join(keep), kidx
    return line.rstrip("\r\n"), idx


class _St:
    __slots__ = ("ranks", "local", "node", "styles")

    def __init__(self) -> None:
        self.ranks: dict[int, int] = {}
        self.local: int | None = None
        self.node: str | None = None
        self.styles: list[str] = []

    def style(self, name: str) -> None:
        if name not in self.styles:
            self.styles.append(name)


def _peel(s: str, pos: int, st: _St) -> int:
    """Strip wrapper layers at ``pos`` until none matches; return the new position."""
    while True:
        m = _WRAP.match(s, pos)
        if m is None:
            return pos
        g = m.group
        if g("rank") is not None:
            st.ranks.setdefault(_P_RANK, int(g("rank")))
            st.style("rank_prefix")
        elif g("mpi") is not None:
            st.ranks.setdefault(_P_RANK, int(g("mpi")))
            st.style("mpi_tag")
        elif g("tmpl") is not None:
            st.ranks.setdefault(_P_TMPL, int(g("tmpl")))
            st.style("elastic_template")
        elif g("lrank") is not None:
            if st.local is None:
                st.local = int(g("lrank"))
            st.style("torchrun_role")
        elif g("task") is not None:
            task = g("task")  # '%*d': space-padded, never zero-padded, width = digits(ntasks-1)
            if len(g("pad")) + len(task) > 7 or (len(task) > 1 and task[0] == "0"):
                return pos
            st.ranks.setdefault(_P_SRUN, int(task))
            st.style("srun_label")
        elif g("sdnode") is not None:
            st.node = st.node or g("sdnode")
            st.style("slurmstepd")
        elif g("host") is not None:
            if not _hostish(g("host")):
                return pos
            st.node = st.node or g("host")
            st.style("pdsh")
        else:  # Ray: needs pid= or ip= to be an actor prefix, not '(some text) '
            ip = g("ip") or g("ip2")
            if not (ip or g("pid") or g("pid2")):
                return pos
            st.node = st.node or ip
            if g("rrank") is not None:
                st.ranks.setdefault(_P_RAY, int(g("rrank")))
            st.style("ray")
        pos = m.end()


def _scan(line: str) -> tuple[Attribution, str, int]:
    s, idx = _clean(line)
    st = _St()
    pos, last = _wrappers(s, st)
    if last is not None:
        st.ranks.setdefault(_P_RANK, int(last.group(1)))
        st.style("rank_prefix")
        pos = _peel(s, last.end(), st)
    rest = s[pos:]
    pg_rank = dev = None
    nccl = _NCCL.match(s, pos) if "NCCL " in rest else None
    if nccl is not None and nccl.group("host").isdigit():  # '12:34:56 [3] ...' is a time
        nccl = None
    if nccl is not None:
        st.node = st.node or nccl.group("host")
        dev = int(nccl.group("dev")) if nccl.group("dev") else None
        st.style("nccl_host")
    if "rank:" in rest and (m := _NEMO.search(rest)):
        st.ranks.setdefault(_P_NEMO, int(m.group(1)))
        st.style("nemo")
    if "Rank " in rest and (m := _PG.search(rest)):
        pg_rank = int(m.group("r"))
        legacy = not m.group(0).startswith("[PG")
        st.style("rank_tag" if legacy else "pg_prefix")
        # A PG rank is the global rank only for the default PG; NCCL's own '[Rank r]' is a comm rank.
        default = m.group("id") == "0" or "0" in (m.group("uid"), m.group("guid2")) or m.group("desc") == "default_pg"
        if (legacy and nccl is None) or default:
            st.ranks.setdefault(_P_PG, pg_rank)
    if _P_SRUN in st.ranks and "torchrun_role" in st.styles:
        del st.ranks[_P_SRUN]  # srun launched one torchrun per node: the label is a node index
    rank = st.ranks[min(st.ranks)] if st.ranks else None
    if pos == 0 and idx is None and not st.styles:
        return _EMPTY, s, 0
    body = pos if idx is None else (idx[pos] if pos < len(idx) else len(line.rstrip("\r\n")))
    key = (rank, st.local, st.node, pg_rank, body, tuple(st.styles), dev)
    return remember(_MADE, key, _attribution, MADE_MAX), s, pos


def _attribution(key: tuple) -> Attribution:
    return Attribution(*key)


# Attributions made, by their fields. Why: a frozen dataclass costs ~3 µs to build (a setattr per field, in Python),
# a fifth of attributing a c10 line, and the lines of one rank share a handful of attributions (same rank, same
# prefixes, same body offset). Frozen, so sharing one is safe. Bounded: cleared when full.
_MADE: dict[tuple, Attribution] = {}
MADE_MAX = 4096


def attribute_line(line: str) -> Attribution:
    """Who emitted ``line``?  ``rank`` is always a GLOBAL rank (None when unknown)."""
    return _scan(line)[0]


def strip_prefixes(line: str) -> str:
    """The line without ANSI colours, tqdm text before the last ``\\r``, trailing CR/LF and
    wrapper prefixes (srun/pdsh/torchrun/Ray/``[rankN]:``).  Idempotent.

    Remembered (bounded, like _MADE): the rules strip the same kept lines several times (each table lookup and
    each coverage test of tools.rules.meaning: 130,000 calls over 10,000 ranks), and only the wrappers are peeled,
    not the headers _scan reads for an Attribution (NCCL, NeMo, PG tags), which decide nothing here."""
    return remember(_STRIPPED, line, _strip, STRIPPED_MAX)


_STRIPPED: dict[str, str] = {}
STRIPPED_MAX = 1 << 17


# c10's own log line: `[rankN]:` (after at most a torchrun role label), then its header `[E1105 03:33:27.000023757
# ProcessGroupNCCL.cpp:636] `, which no wrapper pattern opens on: its wrappers end where the header starts
_C10_HEADED = re.compile(r"(?:\[(?!rank\d)[A-Za-z_]\w*?(\d{1,7})\]:)?\[rank(\d{1,7})\]:"
                         r"(?=\[[EWIF]\d{4} \d\d:\d\d:\d\d\.\d{1,9} [^\]\s]+:\d+\] )")


def c10_headed(line: str) -> re.Match | None:
    """The `[roleL]:[rankN]:` prefix of a c10 log line whose attribution is its prefix alone (group 1: the role's
    local rank or None, group 2: N; end(): where the wrappers end), or None. None unless the line holds one `[rank`
    (attribution reads the last), no CR (tqdm: the text after it counts) and no escape (ANSI colours), and no NCCL
    `host:pid:tid` stands after the header (_NCCL at the same place _scan tries it). Why: at 10,000 ranks the
    watchdog cascade's c10 lines are most of what is stripped and attributed, each ~25 µs the full way; for these
    the full way gives the prefix's answer (tests/scan/test_labels.py checks both over every corpus line)."""
    if not line.startswith("[") or (m := _C10_HEADED.match(line)) is None or "\r" in line or "\x1b" in line \
            or line.count("[rank") != 1 or _NCCL.match(line, m.end()) is not None:
        return None
    return m


def _strip(line: str) -> str:
    """`_scan`'s text after the wrappers, without what only an Attribution needs (none of the header reads). A c10
    log line (c10_headed) is cut after its prefix at once: what _peel and _wrappers would find (the cascade's lines
    at 10,000 ranks: 60,000 strips in the lexicon's onset reading)."""
    if (m := c10_headed(line)) is not None:
        return line[m.end():].rstrip("\n")
    s, _idx = _clean(line)
    st = _St()
    pos, last = _wrappers(s, st)
    if last is not None:
        pos = _peel(s, last.end(), st)
    return s[pos:]


def _wrappers(s: str, st: _St) -> tuple[int, re.Match | None]:
    """(where the text starts after the wrappers that label the whole line, the last `[rankN]:` after them): peel
    at the start (srun/pdsh/tee/Ray label the whole '\n' line, i.e. before any '\r'), then after the last '\r'
    (tqdm: only the text after it is what the terminal shows). The caller peels after the `[rankN]:` it returns."""
    pos = _peel(s, 0, st)
    cr = s.rfind("\r", pos)
    if cr >= 0:
        pos = _peel(s, cr + 1, st)
    last = None
    if s.find("[rank", pos) >= 0:
        for last in _RANK_ANY.finditer(s, pos):
            pass
    return pos, last


def note_local_rank(local_to_rank: dict[int, int], local: int, rank: int) -> None:
    """THE local→global rank mapping of one file: a line like `[default1]:[rank5]:` states that local rank 1 is
    global rank 5 there. A second, different statement for the same local rank makes it ambiguous (-1), and an
    ambiguous local rank is attributed to no rank at all: a wrong rank is worse than none."""
    prev = local_to_rank.setdefault(local, rank)
    if prev != rank:
        local_to_rank[local] = -1


# ---------------------------------------------------------------------------------------- the words of a line
# Who a line's own words name, for small pastes whose lines carry no prefix (issue 25): `[Rank 3]`, `rank 3`,
# `rank=3`, `RANK=3`, `local_rank: 3`, `Process 3 terminated`, `task 3:` (srun), and a host or IP the line states
# (`host: gpu-17`, `on node gpu-17`, `IP: 10.0.0.5`, Ray's `... and address: 172.16.4.12 ... has been marked
# dead`). Only the first three forms of a rank are global ranks; `local_rank` is read as a rank only where nothing
# else names one (a one-node paste). A line that names two different ranks (`rank 1 and rank 0 both on CUDA device
# 1000`) names no single culprit. `instance: host` (cloud alerts) and a syslog line quoted inside another (`... May
# 29 01:37:38 host kernel: NVRM: Xid ...`) name a host too.
# a rank of a sub-group (local, tensor/pipeline/data/expert/context parallel) is not the job's global rank
_SUB_RANK = r"(?<!local )(?<!local_)(?<!tp )(?<!pp )(?<!dp )(?<!ep )(?<!cp )(?<!tp_)(?<!pp_)(?<!dp_)(?<!ep_)(?<!cp_)"
_NAMED_RANK = re.compile(r"(?i)(?<![\w.])(?:\[\s*(?:global[ _])?rank\s*(\d{1,7})\s*\]|" + _SUB_RANK
                         + r"(?:global[ _])?rank\s*[:=#]?\s*(\d{1,7})(?!\w|\.\w)|(?-i:Process) (\d{1,7}) terminated"
                         # torch.multiprocessing.spawn's ProcessExitedException: the spawn index, the rank it gave
                         # (in spawn's own words only: `Worker process 4123 terminated ...` elsewhere is a pid)
                         r"|(?<=ProcessExitedException: )(?-i:process) (\d{1,7}) terminated with (?-i:signal SIG|exit code)"
                         r"|(?-i:task) (\d{1,7}):)")
_NAMED_LOCAL = re.compile(r"(?i)(?<![\w.])local[_ ]rank\s*[:=#]?\s*(\d{1,7})(?![\w.])")
_NAMED_HOST = re.compile(r"(?i)(?<![\w.])(?:(?:host(?:name)?|node|instance)\s*[:=]\s*|(?:on|at) (?:host|node|instance) )"
                         r"([A-Za-z][\w\-]*(?:\.[\w\-]+)*|\d{1,3}(?:\.\d{1,3}){3})(?![\w\-:])|(?<![\w.])(?:IP|address)\s*[:=]\s*"
                         r"(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])"
                         # a syslog line quoted inside another (`... Error: May 29 01:37:38 ip-26-0-1 kernel: NVRM: Xid`)
                         r"|(?-i:\b[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d )([A-Za-z][\w\-.]*) (?:kernel|slurmd|slurmstepd)(?:\[\d+\])?:")


_HOSTISH = re.compile(r"[\d.\-]")


def named_in_text(text: str) -> tuple[int | None, str | None]:
    """(the one rank, the host) that a line's words name; None for either when it names none or several ranks."""
    ranks = {int(next(g for g in m.groups() if g)) for m in _NAMED_RANK.finditer(text)}
    if not ranks:
        ranks = {int(m.group(1)) for m in _NAMED_LOCAL.finditer(text)}
    # a host name has a digit, a dash or a dot in it (gpu-node-7, node17, ip-10-0-0-1): `on node startup` is prose
    hosts = list(dict.fromkeys(h for m in _NAMED_HOST.finditer(text) if _HOSTISH.search(h := m.group(1) or m.group(2)
                                                                                          or m.group(3))))
    return (next(iter(ranks)) if len(ranks) == 1 else None), (hosts[0] if len(hosts) == 1 else None)
