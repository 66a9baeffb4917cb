"""The rank diff's results, and how per-file template counts become them: merged per batch (in the worker) and
over the bundle (in the parent), each template's ranks as one bitset, then the minority and missing templates.

`only`: templates present in fewer than `minority` × N ranks (the ranks that have them); `missing`: templates present
in at least half but not all ranks (the ranks that lack them); N = ranks seen. Ordered by how few ranks are involved;
'only' then puts error-looking templates first (_SEVERE), then templates of ranks that print few single-rank
templates before those of chatty logging ranks (rank 0, the last pipeline stage); both then by count.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from trainlog_debugger.tools.groups import SCHEMA_VERSION, rank_set
from trainlog_debugger.tools.model import Evidence

MAX_TEMPLATES = 200_000         # distinct templates kept over the bundle


@dataclass
class TemplateDiff:
    template: str
    ranks: list[int]                  # the minority: ranks that HAVE it (kind='only') or LACK it (kind='missing')
    kind: str                         # 'only' | 'missing'
    present_in: int                   # how many ranks have it
    count: int                        # total lines with this template
    example: Evidence                 # a real line from a rank that has it (its first occurrence)
    missing_example: Evidence | None = None  # kind='missing': the last line of the first lacking rank


@dataclass
class DiffResult:
    root: str
    ranks: list[int]
    templates: int
    bytes: int
    lines: int
    seconds: float
    only: list[TemplateDiff] = field(default_factory=list)
    missing: list[TemplateDiff] = field(default_factory=list)
    unattributed_files: list[str] = field(default_factory=list)  # files none of whose lines got a rank
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """`debugger diff --json`, schema_version 2: every field as plain JSON, the view the agent's rank_diff tool
        reads; each rank list (the ranks compared, each template's minority) as a range set with its count."""
        from trainlog_debugger.tools.jsonable import fields_jsonable
        d = {"schema_version": SCHEMA_VERSION, **fields_jsonable(self)}
        d["ranks"], d["rank_count"] = rank_set(self.ranks), len(self.ranks)
        for kind in ("only", "missing"):
            for td, j in zip(getattr(self, kind), d[kind]):
                j["ranks"], j["rank_count"] = rank_set(td.ranks), len(td.ranks)
        return d


@dataclass
class FileOut:
    """One file's templates with their resolved ranks, as a worker's file reader (tools.rankdiff.analyze) leaves them."""

    idx: int
    rel: str
    bytes: int = 0
    lines: int = 0
    unranked_lines: int = 0
    ranks: set[int] = field(default_factory=set)
    templates: dict[str, list] = field(default_factory=dict)   # t → [count, first_line, rank, text, ranks set]
    last: dict[int, tuple[int, str]] = field(default_factory=dict)  # rank → (line, text)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class Batch:
    """Files merged: what a forked worker sends back for its batch, and the parent's running total."""

    templates: dict[str, list] = field(default_factory=dict)  # t → [count, (idx, line), rank, text, bits]
    last: dict[int, tuple[int, int, str]] = field(default_factory=dict)  # rank → (idx, line, text)
    files: list[FileOut] = field(default_factory=list)        # per-file stats (templates emptied)
    dropped: int = 0                                          # templates beyond MAX_TEMPLATES


def _bits(ranks) -> int:
    b = 0
    for r in ranks:
        b |= 1 << r
    return b


def merge_file(agg: Batch, fo: FileOut) -> None:
    tm = agg.templates
    for t, (c, line, r, text, ranks) in fo.templates.items():
        bits = (1 << r) if len(ranks) == 1 else _bits(ranks)
        e = tm.get(t)
        if e is None:
            tm[t] = [c, (fo.idx, line), r, text, bits]
        else:
            e[0] += c
            e[4] |= bits
            if (fo.idx, line) < e[1]:
                e[1], e[2], e[3] = (fo.idx, line), r, text
    for r, (line, text) in fo.last.items():
        cur = agg.last.get(r)
        if cur is None or (fo.idx, line) > cur[:2]:
            agg.last[r] = (fo.idx, line, text)
    fo.templates = {}
    fo.last = {}
    agg.files.append(fo)


def merge_batch(agg: Batch, b: Batch) -> None:
    tm = agg.templates
    full = len(tm) >= MAX_TEMPLATES
    for t, e in b.templates.items():
        cur = tm.get(t)
        if cur is None:
            if full or len(tm) >= MAX_TEMPLATES:
                full = True
                agg.dropped += 1
                continue
            tm[t] = e
        else:
            cur[0] += e[0]
            cur[4] |= e[4]
            if e[1] < cur[1]:
                cur[1], cur[2], cur[3] = e[1], e[2], e[3]
    for r, v in b.last.items():
        had = agg.last.get(r)
        if had is None or v[:2] > had[:2]:
            agg.last[r] = v
    agg.files.extend(b.files)


def _ranks_of(bits: int) -> list[int]:
    s = bin(bits)[:1:-1]
    out, i = [], s.find("1")
    while i != -1:
        out.append(i)
        i = s.find("1", i + 1)
    return out


# Sorts error-looking templates first among those of equally few ranks (ordering only; nothing is filtered out).
_SEVERE = re.compile(r"(?i)error|exception|traceback|fail|fatal|abort|timeout|timed out|killed|sig[a-z]{2,4}\b|"
                     r"\bnan\b(?! iterations)|refused|unreachable|denied|cannot|unable|invalid|illegal|corrupt|"
                     r"panic|segmentation|core dumped|out of memory|\boom\b|retry|warn|^\[?[EFW]<TS>")


def report(bundle, agg: Batch, minority: float, max_report: int, notes: list[str]) -> DiffResult:
    srcs = bundle.sources
    files = sorted(agg.files, key=lambda f: f.idx)
    ranks: set[int] = set()
    unattributed: list[str] = []
    unranked, empty = [], []
    for f in files:
        ranks |= f.ranks
        if f.error:
            notes.append(f"{f.rel}: {f.error} (read stopped after {f.bytes:,} bytes)")
        notes.extend(f"{f.rel}: {n}" for n in f.notes)
        if not f.ranks:
            if f.unranked_lines:
                unattributed.append(f.rel)
            else:
                empty.append(f.rel)
        elif f.unranked_lines:
            unranked.append(f)
    if agg.dropped:
        notes.append(f"more than {MAX_TEMPLATES:,} distinct templates in the bundle: {agg.dropped:,} later ones "
                     f"were not compared")
    if empty:
        notes.append(f"{len(empty)} file(s) with no text lines: {', '.join(empty[:5])}"
                     + (" …" if len(empty) > 5 else ""))
    if unranked:
        ex = ", ".join(f"{f.rel} ({f.unranked_lines:,})" for f in unranked[:5])
        notes.append(f"{sum(f.unranked_lines for f in unranked):,} lines in {len(unranked)} file(s) with other ranks "
                     f"had no rank label and were left out: {ex}" + (" …" if len(unranked) > 5 else ""))
    res = DiffResult(root=bundle.root, ranks=sorted(ranks), templates=len(agg.templates),
                     bytes=sum(f.bytes for f in files), lines=sum(f.lines for f in files), seconds=0.0,
                     unattributed_files=unattributed, notes=notes)
    n = len(ranks)
    if n < 2:
        notes.insert(0, f"rank diff needs at least 2 ranks; saw {n}" + (f" (rank {min(ranks)})" if ranks else "")
                     + "; nothing compared")
        return res
    all_bits = _bits(ranks)
    only, missing = [], []
    single: Counter = Counter()
    for t, e in agg.templates.items():
        k = e[4].bit_count()
        if k >= n:
            continue
        if k < minority * n:
            only.append((k, t, e))
            if k == 1:
                single[e[4].bit_length() - 1] += 1
        elif 2 * k >= n:
            missing.append((k, t, e))
    only.sort(key=lambda x: (x[0], not _SEVERE.search(x[1]), single[x[2][4].bit_length() - 1] if x[0] == 1 else 0,
                             -x[2][0], x[1]))
    missing.sort(key=lambda x: (n - x[0], -x[2][0], x[1]))

    def ev(idx: int, line: int, text: str, r: int) -> Evidence:
        return Evidence(file=srcs[idx].rel, line=line, text=text, rank=r, kind=srcs[idx].kind)

    for k, t, (c, (idx, line), r, text, bits) in only[:max_report]:
        res.only.append(TemplateDiff(t, _ranks_of(bits), "only", k, c, ev(idx, line, text, r)))
    for k, t, (c, (idx, line), r, text, bits) in missing[:max_report]:
        lack = _ranks_of(all_bits & ~bits)
        last = agg.last.get(lack[0])
        res.missing.append(TemplateDiff(t, lack, "missing", k, c, ev(idx, line, text, r),
                                        ev(last[0], last[1], last[2], lack[0]) if last else None))
    for name, rows in (("minority", only), ("missing", missing)):
        if len(rows) > max_report:
            notes.append(f"showing {max_report} of {len(rows)} {name} templates")
    return res
