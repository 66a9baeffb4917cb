"""Reading an error line by what it means, where no rule knows it (issue 25).

Two readers, in order of authority:
1. **The ecosystem's own tables** (tools/sources/messages): a line that an upstream prints (an NCCL WARN, a Ray
   memory-monitor kill, a CUDA error string, a Slurm or kernel message) is what its source says it is. A table
   entry whose role is `trigger` makes the line a candidate of the entry's category, decisive but below a specific
   rule (TABLE_STRENGTH), with the entry's meaning, action and upstream file:line. The tables speak for every line
   the scan kept, so they also stand behind what a rule found (tools/diagnose.py reads them for the chain).
2. **The lexicon** (tools/sources/messages/lexicon.yaml): when nothing decisive fires, the earliest error-level
   line at the failure's onset, on the rank that stands out (on any rank when none does), is classified by its
   words. Always weak
   (LEXICON_STRENGTH, below the diagnosis's DECISIVE): the answer is `inconclusive`, low confidence, with the line
   cited and the category it most likely is. Why at all: "no fault found" on a job that printed `Task was killed
   due to the node running low on memory` sends the engineer back to bed with a dead job. "No fault found" stays
   only for bundles where no rank has an error-level line at all.

Error-level lines are the kept hits of every root-candidate pattern (the catalog's fallbacks included, and
generic.error_line, the scan's last resort for a failure word nobody explains), minus cascade lines (an NCCL
timeout waits for the trigger, it is never one), lines a table calls noise or context, and the lines of hardware
snapshots (`nvidia-smi -q` has an `ECC Errors` heading on a healthy GPU: tools/sources/hw compares those values instead;
nccl-tests' own failure lines are errors, read as any other).
"""

from __future__ import annotations

import re
from operator import itemgetter

from functools import lru_cache

from trainlog_debugger.tools.lines.attribution import named_in_text, strip_prefixes
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.rules.asymmetry import MIN_RANKS
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.rules.base import RuleInputs, by_time, candidate
from trainlog_debugger.tools.sources import is_cascade, patterns
from trainlog_debugger.tools.sources.detect import HW_KINDS
from trainlog_debugger.tools.sources.hw.format import NCCL_TESTS

# snapshots whose lines are values, not errors (`nvidia-smi -q`'s `ECC Errors` heading on a healthy GPU); nccl-tests
# is a program's run as well as a measurement: its `Test NCCL failure common.cu:N '<ncclGetErrorString>'` is an error
# line like any other (nccl-tests src/common.h NCCLCHECK)
_VALUE_KINDS = HW_KINDS - {NCCL_TESTS}

TABLE_STRENGTH = 0.55
LEAD_STRENGTH = 0.4  # an entry marked `lead` (a class of failures, not its cause): below DECISIVE, so inconclusive
LEXICON_STRENGTH = 0.3
CONSEQUENCE_STRENGTH = 0.2  # a reading of consequence lines only: below the collective analysis's own weak reading
ONSET_LINES = 6     # error lines from the onset (on the outlier rank first) read for a lexicon category


def read_by_words(f: RuleInputs, text: str) -> tuple[str, str, str] | None:
    """(category, the words that decided it, why) for a line, by the first lexicon row its text (prefixes
    stripped) contains; None when no row does."""
    return f.messages.read_by_words(strip_prefixes(text))


@lru_cache(maxsize=2)
def _error_level_ids(cascade: bool = False) -> tuple[str, ...]:
    if cascade:
        return tuple(p.id for p in patterns() if p.role == "cascade" and p.tier > 0)
    return tuple(p.id for p in patterns() if p.role == "root_candidate" or p.id in ("generic.error_line",
                                                                                     "generic.error_level"))


def _memo(f: RuleInputs, key, make):
    """One computation per RuleInputs (three rules read the same error lines; at 1,024 ranks they are ~10,000)."""
    memo = f.__dict__.setdefault("_meaning_memo", {})
    if key not in memo:
        memo[key] = make()
    return memo[key]


def error_lines(f: RuleInputs, cascade: bool = False) -> list[Evidence]:
    return _memo(f, ("lines", cascade), lambda: _error_lines(f, cascade))


def _error_lines(f: RuleInputs, cascade: bool) -> list[Evidence]:
    """Every kept error-level line (see the module's docstring), earliest first, each line once; a traceback
    contributes its final exception line (the words that say what failed), not its `Traceback` header. With
    `cascade`, the lines of cascade patterns instead (an NCCL error that only says `unhandled cuda error`): what a
    bundle whose only error lines are consequences still says."""
    seen: set[tuple[str, int]] = set()
    out: list[tuple[tuple, Evidence]] = []
    keyed = f.by_pattern.keyed  # each hit with its by_time key, made once per pattern (tools.rules.base)
    for pid in _error_level_ids(cascade):
        if pid not in f.by_pattern:
            continue
        for k, e in keyed(pid):
            if pid == "python.traceback":
                fx = f.fields_of(e, pid)
                if not fx.get("exception_text"):
                    continue
                e = Evidence(file=e.file, line=fx["exception_line"], text=fx["exception_text"], time=e.time,
                             rank=e.rank, node=e.node, kind=e.kind)
                k = by_time(e)
            key = (e.file, e.line)
            if key in seen or e.kind in _VALUE_KINDS or (not cascade and is_cascade(e.text)):
                continue
            seen.add(key)
            out.append((k, e))
    out.sort(key=_KEY)  # the keys made above, not once more per line (28,000 cascade lines at 4,096 ranks)
    return [e for _k, e in out]


_KEY = itemgetter(0)


# What every rank of a job prints differently in one message: its rank (`[Rank 17]`, `rank 17`), glog's header
# (`E1105 03:35:19.123456789`) and NCCL's `host:pid:tid [dev]` prefix. No table entry reads them (templates hold the
# message, not the header; a test checks every entry's example reads the same with them masked), so the lines of
# 4,096 ranks that say one thing are matched once, not 4,096 times (issue 28: 0.9 s of `ask` at 4,096 ranks).
_RANK_NO = re.compile(r"(ank[ :=]{0,2})\d{1,7}")  # `[Rank 17]`, `rank 17`, `[rank17]:` (a literal start: fast)
_GLOG = re.compile(r"[EWIF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?")
_NCCL_PREFIX = re.compile(r"^\S+:\d+:\d+ \[\d+\]")
HEADER = 64  # glog's header and NCCL's prefix sit at the start of a line (after at most a rank label)


def _zero_rank(m: re.Match) -> str:
    """`\\g<1>0` as a function: re expands a template on every match, at twice the cost (once per kept line)."""
    return m.group(1) + "0"


def table_key(text: str) -> str:
    """The text a table entry is matched against, with what differs rank to rank masked."""
    text = _RANK_NO.sub(_zero_rank, text)
    head = text[:HEADER]
    if ":" in head:
        text = _NCCL_PREFIX.sub("#", _GLOG.sub("#", head, 1), 1) + text[HEADER:]
    return text


def _body(f: RuleInputs, text: str) -> str:
    """A line's text as the tables read it: masked (table_key), its prefixes stripped. Once per text and per
    RuleInputs (three rules ask for the same lines), and stripped once per masked text (once for all ranks)."""
    of_text: dict[str, str] = f.__dict__.setdefault("_meaning_of_text", {})
    b = of_text.get(text)
    if b is None:
        stripped: dict[str, str] = f.__dict__.setdefault("_meaning_bodies", {})
        k = table_key(text)
        b = stripped.get(k)
        if b is None:
            b = stripped[k] = strip_prefixes(k)
        of_text[text] = b
    return b


def tables_of(f: RuleInputs, evs: list[Evidence]):
    """Each line's best table entry (or None), in the order of `evs`; a text is stripped and matched once per
    RuleInputs, whichever rule asks, and once for all ranks that print it (table_key)."""
    known: dict[str, object] = f.__dict__.setdefault("_meaning_tables", {})
    bodies = [_body(f, e.text) for e in evs]
    new = [t for t in dict.fromkeys(bodies) if t not in known]  # all of them: one engine pass, no cap to report
    if new:
        known.update(zip(new, (f.messages.pick_best(h, t) for h, t in zip(f.messages.match_many(new), new))))
    return [known.get(b) for b in bodies]


def handled_per_table(f: RuleInputs, evs: list[Evidence]) -> list[bool]:
    """For each line, whether its upstream's table documents it as handled (role noise or context: the upstream
    says the line is no failure, `NCCL_SOCKET_NTHREADS is greater than the maximum allowed, setting to 16`)."""
    if f.messages is None or not evs:
        return [False] * len(evs)
    return [m is not None and m.role in ("noise", "context") for m in tables_of(f, evs)]


# The header torch's Python logging (torch._logging, glog-style) prints on EVERY line of a multi-line record:
# level+MMDD, time, pid, the call site's file:line, and the compile id where there is one
# (`E0314 10:03:05.881000 7101 torch/_inductor/select_algorithm.py:1683] [0/0] `), after a launcher's rank labels
_PY_RECORD = re.compile(r"^(.{0,64}?[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]{1,200}\.py:\d{1,6}\] "
                        r"(?:\[[^\]\s]{1,40}\] )?)")
RECORD_LINES = 400  # how far back a record's first line is looked for (a traceback quoted in one record)


def _kept_in(f: RuleInputs, file: str) -> list[Evidence]:
    """Every kept line of one file, in line order (once per file asked for: only a candidate's file is)."""
    index: dict[str, list[Evidence]] = f.__dict__.setdefault("_kept_in_file", {})
    got = index.get(file)
    if got is None:
        got = index[file] = f.by_pattern.in_file(file)
    return got


def in_handled_record(f: RuleInputs, ev: Evidence) -> bool:
    """Whether line `ev` is a later line of a multi-line log record (torch's Python logging repeats its header on
    each line) whose first kept line a table documents as handled (noise or context): Inductor's
    `Runtime error during autotuning: \n<the CUDA error>\n ... Ignoring this choice.` quotes a CUDA error that the
    autotuner caught and dropped; the quoted line is that record's, not a new failure."""
    if f.messages is None or (m := _PY_RECORD.match(ev.text)) is None:
        return False
    head = m.group(1)
    same = [e for e in _kept_in(f, ev.file) if ev.line - RECORD_LINES <= e.line < ev.line and e.text.startswith(head)]
    return bool(same) and handled_per_table(f, [same[0]])[0]


def upstream_messages(f: RuleInputs):
    """One candidate per table entry of role `trigger` that a kept error-level line prints: the upstream's own
    reading of that line (category, meaning, action, where it comes from)."""
    if f.messages is None:
        return []
    evs = error_lines(f)
    if not evs:
        return []
    groups: dict[str, list] = {}
    for e, m in zip(evs, tables_of(f, evs)):
        if m is not None and m.role == "trigger":
            groups.setdefault(m.id, [m, []])[1].append(e)
    out = []
    for m, lines in groups.values():
        # the meaning alone: the line itself is cited right under it
        what = (f"{m.meaning} ({m.table}; a class of failures, not its cause: the line that says which is not in "
                f"the bundle)" if m.lead else f"{m.meaning} ({m.table})")
        out.append(candidate(f"table.{m.table}", m.category, what,
                             LEAD_STRENGTH if m.lead else TABLE_STRENGTH, lines[:3], f, status=m.status,
                             facts={"upstream": m.cite(), "template": m.template, "meaning": m.meaning,
                                    **({"name": m.name} if m.name else {})},
                             recommendations=[m.action]))
    return out


LAST_ERROR_STRENGTH = 0.65  # NCCL's own reason under c10d's generic `ncclInvalidUsage`/`ncclSystemError`: above
                           # both the table reading of that wrapper and the NCCL error-class rules (tools/rules/network)


# NCCL's bare quote of a CUDA runtime error (checks.h: `Cuda failure '<cudaGetErrorString>'`): read by the CUDA table's
# entry for the quoted error (`no kernel image is available for execution on the device` is the install's), where
# NCCL's own longer messages (`Failed to bind NVLink SHARP (NVLS) Multicast memory ... CUDA error 401 '...'`) say more
NCCL_QUOTES_CUDA = "Cuda failure"
NCCL_PLUGIN_SOURCES = ("aws-ofi-nccl:", "libfabric:")  # table sources whose messages NCCL itself prints (its net
# plugins, and the libfabric provider errors aws-ofi-nccl quotes as `strerror: ...`)


def nccl_last_error(f: RuleInputs):
    """The reason NCCL itself gave (ncclGetLastError), printed by c10d after `Last error:`: read through NCCL's
    own tables. `ncclInvalidUsage: This usually reflects invalid usage` says little; `Duplicate GPU detected : rank 1
    and rank 0 both on CUDA device 1a000` under it says the launch put two ranks on one GPU (config)."""
    if f.messages is None:
        return []
    out, seen = [], set()
    for e in f.hits("pytorch.nccl_last_error"):
        fx = f.fields_of(e, "pytorch.nccl_last_error")
        detail = fx.get("detail")
        if not detail or detail in seen:
            continue
        seen.add(detail)
        # NCCL's tables, and its network plugin's (aws-ofi-nccl warns through NCCL's logger, so its WARN is NCCL's
        # last error too: `NET/OFI Unable to insert remote address into address vector`)
        found = f.messages.match_many([detail])[0]
        hits = [m for m in found if m.table.startswith("nccl") or m.source.startswith(NCCL_PLUGIN_SOURCES)]
        m = f.messages.pick_best(hits, detail)
        if m is not None and m.template.startswith(NCCL_QUOTES_CUDA):  # only the quote: the CUDA error's own reading
            m = f.messages.pick_best(hits + [x for x in found if x.table == "cuda"], detail)
        if m is None or m.role != "trigger" or m.category is None:
            continue
        ev = Evidence(file=e.file, line=fx["detail_line"], text=fx["detail_text"], time=e.time or _wrapper_time(f, e),
                      rank=e.rank, node=e.node, kind=e.kind)
        evs = [ev] if ev.line == e.line else [ev, e]
        # a rule's id, not a table reading's (`table.`): it outranks the NCCL error-class rules by strength, where
        # the diagnosis would set a mere reading aside for any decisive rule (tools/diagnose.py READINGS)
        out.append(candidate("nccl.last_error", m.category, f"{m.meaning} (NCCL's last error)",
                             LAST_ERROR_STRENGTH, evs, f, status=m.status,
                             facts={"upstream": m.cite(), "table": m.table, "template": m.template,
                                    "meaning": m.meaning,
                                    # what a survivor sees when its peer's process is gone: the consequence of
                                    # another rank's own failure where there is one (diagnose._without_peer_closed)
                                    **({"peer_closed": ranks_str({x.rank for x in evs if x.rank is not None}, cap=64)}
                                       if _PEER_GONE.search(detail) else {})},
                             recommendations=[m.action]))
        if len(out) >= 3:
            break
    return out


# a last error that says the peer went away (libfabric/EFA's `Unresponsive remote (was previously responsive)`, a
# socket `Connection closed by remote peer` or `reset by peer`)
_PEER_GONE = re.compile(r"(?i)\bunresponsive remote\b|\bclosed by remote peer\b|\breset by peer\b")

LAST_ERROR_SPAN = 4  # lines between c10d's `NCCL error: ...` and its `Last error:` (the ncclResult's name between)


def _wrapper_time(f: RuleInputs, e: Evidence):
    """The time of the c10d error that prints this `Last error:` a few lines above it (its reason has no stamp of
    its own). Why: the reason and its wrapper are one failure; without it the wrapper, timed, won the
    earliest-trigger ordering against its own reason (diagnose.pick orders the timed first)."""
    near = [w for w in f.hits("pytorch.nccl_error_kind", "pytorch.nccl_error")
            if w.file == e.file and w.time is not None and 0 < e.line - w.line <= LAST_ERROR_SPAN]
    return max(near, key=lambda w: w.line).time if near else None


def read_by_meaning(f: RuleInputs):
    """The lexicon's reading of the failure's onset: the earliest error-level line, on the rank that stands out
    (the earliest of the ranks that printed one, when not every rank did), and the lines after it on that rank."""
    if f.messages is None:
        return []
    # only consequences erred (cascade lines, or lines a table calls cascade): what they say is read, but it blames
    # nobody and yields to any other reading (the collective analysis knows more about a timeout than its words)
    lines = error_lines(f)
    if any(m is not None and m.role == "trigger" for m in tables_of(f, lines)):
        return []  # an upstream table reads the failure (upstream_messages): words would only repeat it
    evs, consequence = _onset_pool(f, lines)
    if not evs:
        evs, consequence = _onset_pool(f, error_lines(f, cascade=True))[0], True
    if not evs:
        return []
    seen = set(f.scan.ranks)
    erring = {e.rank for e in evs if e.rank is not None}
    onset = evs[0]
    # a rank stands out when it is among few of enough ranks to compare (asymmetry.MIN_RANKS), and it went first
    # by the clock, or it is the only one: without times "first" would only be the files' order
    outlier = (onset.rank is not None and len(seen) >= MIN_RANKS and erring < seen
               and (onset.time is not None or len(erring) == 1))
    same = [e for e in evs if e.rank == onset.rank][:ONSET_LINES] if onset.rank is not None else evs[:ONSET_LINES]
    for e in same:
        said = read_by_words(f, e.text)
        if said:
            cat, words, why = said
            break
    else:
        # the first fault's words name nothing: what the consequences say (`exited on signal 9 (Killed)`) is a better
        # guess than a program error, though it blames nobody and yields to any other reading
        later = [] if consequence else _onset_pool(f, error_lines(f, cascade=True))[0][:ONSET_LINES]
        for c in later:
            said = read_by_words(f, c.text)
            if said:
                e, (cat, words, why), consequence = c, said, True
                break
        else:
            e, cat, words, why = onset, "software", "", "an error no table or word list knows: most likely the program's"
    # the line's rank is the culprit when it stands out among enough ranks to compare (asymmetry.MIN_RANKS), or in
    # a one-rank paste; a line with no rank lets its own words name one (tools.rules.base.candidate)
    ranks = ([e.rank] if outlier or len(seen) <= 1 else []) if e.rank is not None else None
    if consequence:
        ranks, outlier = [], False
    who = ((f" on rank {e.rank}, the first of {len(erring)} of {len(seen)} ranks with an error line"
            if len(erring) > 1 else f" on rank {e.rank}, the only one of {len(seen)} ranks with an error line")
           if outlier else " (only consequences erred: a timeout or an abort, no first fault)" if consequence else "")
    return [candidate("meaning.lexicon", cat, f"read by its words ({words!r}): {why}{who}" if words else
                      f"read by its words: {why}{who}",
                      CONSEQUENCE_STRENGTH if consequence else LEXICON_STRENGTH,
                      [e], f, ranks=ranks if ranks is not None else None,
                      facts={"read_by": "lexicon", "words": words, "lexicon_why": why,
                             **({"fallback": True, "consequence_only": True} if consequence else {})},
                      recommendations=[f"read the cited line first: its words ({words!r}) point at {cat}" if words
                                       else "read the cited line first: no table or word list knows it"])]


# Rules that name a category from a line's wording alone (the CUDA error string, the NCCL source file that warned,
# an exception nobody classified; and a terminal exception classified by its type alone, facts `by_type`): where the
# upstream's own table documents that very line as a trigger of another
# category, the table's reading stands (cudaErrorSystemNotReady is the fabric manager, not the GPU; an NCCL WARN
# from init.cc about two ranks on one GPU is the launch, not the network). Rules that decided by cross-rank,
# cross-source or curated analysis are never re-read.
READ_BY_WORDING = frozenset({"gpu.cuda_error", "gpu.nccl_cuda", "gpu.library", "network.nccl_subsystem",
                             "software.exception"})
MIN_SPECIFIC = 12  # literal characters a table entry must pin down to re-read a rule's category
# ... and to re-read where an exception was raised (a sample's frames say `data`): a message of its own, not an errno's
# words (`No such file or directory` raised in __getitem__ is the sample's missing file, not a path setting)
FRAME_SPECIFIC = 32
# an exception no classifier knew is `software` by default, weakly: what its words say is a better guess
LEXICON_REREAD = frozenset({"software.exception"})


def refine(cands: list, f: RuleInputs) -> None:
    """Attach the upstream's reading (facts `upstream`, `meaning`) to every candidate whose trigger line a table
    documents, and re-read the category of READ_BY_WORDING candidates where that entry is a specific trigger of
    another category (facts `category_was`), its action first among the recommendations."""
    cands = [c for c in cands if c is not None and c.evidence and not c.rule.startswith(("table.", "meaning."))]
    if not cands or f.messages is None:
        return
    for c, m in zip(cands, tables_of(f, [c.evidence[0] for c in cands])):
        if m is None and c.rule in LEXICON_REREAD:
            said = f.messages.read_by_words(strip_prefixes(c.evidence[0].text), strong_only=True)
            if said and said[0] != c.category:
                c.facts.update(category_was=c.category, read_by="lexicon", words=said[1])
                c.finding = c.finding.model_copy(update={"category": said[0],
                                                         "summary": f"{c.summary} — read by its words: {said[2]}"})
            continue
        if m is None or m.role != "trigger":
            continue
        c.facts.setdefault("upstream", m.cite())
        c.facts.setdefault("meaning", m.meaning)
        rereads = (c.rule in READ_BY_WORDING or c.facts.get("by_type")
                   or (c.facts.get("by_frame") and m.specificity >= FRAME_SPECIFIC))
        if m.lead and rereads and (told := _told_which(f, m, c.evidence[0])) is not None:
            # a class of failures (fairseq's `gradients are inconsistent between workers`) whose record goes on to
            # say which one (`rank   3 = nan`): read by that line, which is cited and names the rank
            m2, line = told
            c.facts.update(category_was=c.category, upstream=m2.cite(), meaning=m2.meaning)
            c.finding = c.finding.model_copy(update={
                "category": m2.category, "summary": f"{c.summary} — {m2.table}: {m2.meaning}",
                "evidence": [c.evidence[0], line] + c.evidence[1:],
                # the rank the line itself names (`rank   3 = nan`), not the rank whose log printed the block
                "ranks": [r] if (r := named_in_text(line.text)[0]) is not None else c.finding.ranks})
            c.recommendations = [m2.action] + [r for r in c.recommendations if r != m2.action]
            continue
        if rereads and m.category != c.category and m.specificity >= MIN_SPECIFIC:
            c.facts["category_was"] = c.category
            c.finding = c.finding.model_copy(update={"category": m.category,
                                                     "summary": f"{c.summary} — {m.table}: {m.meaning}"})
            c.recommendations = [m.action] + [r for r in c.recommendations if r != m.action]


RECORD_LINES = 40  # how far after a line its own record (an exception's message, the block it announces) may go on


def _told_which(f: RuleInputs, lead, line: Evidence):
    """(row, line): the first line after `line` in its file, within RECORD_LINES, that a specific (not `lead`) trigger
    of the same table reads: the part of the record that says which of the lead's failures this is. None if none."""
    after = [e for e in error_lines(f) if e.file == line.file and line.line < e.line <= line.line + RECORD_LINES]
    for e, m in zip(after, tables_of(f, after)):
        if m is not None and m.table == lead.table and m.role == "trigger" and not m.lead and m.category:
            return m, e
    return None


def _onset_pool(f: RuleInputs, evs: list[Evidence]) -> tuple[list[Evidence], bool]:
    """(the lines a reading may start from, whether they are only consequences): the lines no table knows; failing
    those, the ones a table calls cascade (never noise or context)."""
    if not evs:
        return [], False
    pairs = [(e, m if m is None or m.role == "trigger" or _covers(m, e.text, f.messages) else None)
             for e, m in zip(evs, tables_of(f, evs))]
    first = [e for e, m in pairs if m is None]
    if first:
        return first, False
    return [e for e, m in pairs if m is not None and m.role == "cascade"], True


# what the kernel puts before its message, however the log was read: dmesg's `[ 1211.000212]` or `dmesg -T`'s
# `[Fri Apr  4 01:17:09 2025]`, syslog's `Apr  4 01:17:09 cn-117 kernel: `, and a subsystem's tag before its
# bracketed one (`mce: [Hardware Error]: `): headers, not words of the message a table entry must cover
_KERNEL_HEAD = re.compile(r"^(?:\[ *\d{1,10}\.\d{3,9}\] *|\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d "
                          r"\d\d:\d\d:\d\d \d{4}\] *|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S{1,64} kernel: )+"
                          r"(?:[a-z][\w-]{0,15}: )?(?:\[[A-Z][\w ]{0,30}\]: *)?")


def _covers(m, text: str, messages=None) -> bool:
    """Whether a table entry speaks for the whole line, not for a word in it: an enum name (`ncclSuccess`) inside
    a failed CHECK does not make the CHECK context. At least 16 literal characters, and 40 % of the line's body or
    the line's whole message after its headers (c10d's retry warning with a long address and errno in its
    placeholders: catalog.spans_whole)."""
    body = _KERNEL_HEAD.sub("", strip_prefixes(text).strip(), count=1)
    if m.specificity >= max(16, 0.4 * len(body)):
        return True
    return m.specificity >= 16 and messages is not None and messages.spans_whole(m, body)


# The lexicon reads a line only "when nothing decisive fires" (issue 25): tools.diagnose.candidates skips it once a
# rule has decided (RULES of the families before this one run first: tools/rules/__init__.FAMILIES ends here).
read_by_meaning.undecided_only = True  # type: ignore[attr-defined]

RULES = [upstream_messages, nccl_last_error, read_by_meaning]
