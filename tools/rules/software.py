"""A program error that no specific rule explains: the exception a traceback ended in, segfaults, aborts."""

from __future__ import annotations

import re
from bisect import bisect_right

from trainlog_debugger.tools.sources import is_cascade
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.lines.attribution import strip_prefixes
from trainlog_debugger.tools.rules.base import RANK_BLOCK, RuleInputs, candidate
from trainlog_debugger.tools.rules.infra import launcher_ranks, signalled_workers
from trainlog_debugger.tools.rules.terminal import LOADER_WRAPPER, by_type, classify, handled


def classify_terminal(text: str, frames=(), exception: str | None = None) -> tuple[str, str] | None:
    """(category, why) for a terminal exception: tools/rules/terminal.py's table."""
    return classify(text, frames, exception)


def exception(f: RuleInputs):
    """The first failing rank's terminal exception, followed to its innermost cause: Python prints a chain's cause
    first, so the first traceback is the cause; `Caught X in DataLoader worker process N` is followed into the
    worker's `Original Traceback`. A classified exception is decisive; anything else is weak software."""
    tbs = f.hits("python.traceback")
    for i, ev in enumerate(tbs):
        fx = f.fields_of(ev, "python.traceback")
        text = fx.get("exception_text")
        if not text or is_cascade(text) or "Original Traceback" in ev.text or _wraps_what_follows(f, fx, ev, tbs) \
                or _NCCL_RAISED.search(text) or f.ignored(ev) or _noise(f, text):
            continue
        exc = Evidence(file=ev.file, line=fx["exception_line"], text=text, time=ev.time, rank=ev.rank, node=ev.node,
                       kind=ev.kind)
        evs = [exc, ev]
        said = classify_terminal(text, fx.get("frames", ()), fx.get("exception"))
        read = (text, fx.get("exception"))  # the exception line the reading is of, and its type
        if said and said[0] == "data" and "DataLoader worker" in text:
            inner = _original_traceback(f, ev, fx)
            if inner is not None:
                ifx = f.fields_of(inner, "python.traceback")
                deeper = classify_terminal(ifx["exception_text"], ifx.get("frames", ()), ifx.get("exception"))
                evs = [Evidence(file=inner.file, line=ifx["exception_line"], text=ifx["exception_text"], time=ev.time,
                                rank=ev.rank, node=ev.node, kind=ev.kind), exc, ev]
                said = deeper if deeper else (said[0], f"{said[1]}; the worker raised {ifx.get('exception')}")
                if deeper:
                    read = (ifx["exception_text"], ifx.get("exception"))
        # DCP prints each failed rank's traceback under a header naming it, whichever rank prints the wrapper
        ranks = [int(m.group(1))] if (m := RANK_BLOCK.search(ev.text)) else None
        if said:  # a clearly classified terminal error is decisive
            typed = said == by_type(fx.get("exception")) and evs[0].text == text
            # read by where it was raised (a sample's frames), not by what it says: an upstream table that documents
            # the very message (`Asking to pad but the tokenizer does not have a padding token`: the tokenizer's
            # setting) re-reads it, as it re-reads a type-only reading (tools/rules/meaning.refine)
            framed = not typed and said != classify_terminal(read[0], (), read[1])
            return [candidate("software.terminal_error", said[0], f"{said[1]}: {evs[0].text.strip()[:160]}", 0.75,
                              evs, f, ranks=ranks,
                              facts={"classified_by": "terminal exception", **({"by_type": True} if typed else {}),
                                     **({"by_frame": True} if framed else {})},
                              recommendations=["fix what the error names, then restart"])]
        return [candidate("software.exception", "software", f"{fx['exception']}: {fx.get('message', '')[:160]}", 0.45,
                          evs, f, ranks=ranks,
                          recommendations=["fix the error in the traceback (its last frames are in the file)"])]
    evs = [e for e in f.hits("python.exception", "python.exception_named")
           if not is_cascade(e.text) and not handled(e.text) and not f.ignored(e)]
    # the DataLoader's wrapper (`Caught X in DataLoader worker process N.`) says where, the worker's own exception
    # under its `Original Traceback` says what: a wrapper with an exception after it in its file is read past
    # (only where what it wraps says more: an exception the terminal table or an upstream table reads; a wrapped
    # `ValueError: didn't find ['jpg']` says no more than the wrapper's own "a sample failed to load")
    after: dict[str, list[Evidence]] = {}
    for e in evs:
        after.setdefault(e.file, []).append(e)
    at = {k: sorted(v, key=lambda e: e.line) for k, v in after.items()}
    lines = {k: [e.line for e in v] for k, v in at.items()}
    evs = [e for e in evs if not (LOADER_WRAPPER.search(e.text)
                                  and (w := _wrapped(lines[e.file], at[e.file], e.line)) is not None
                                  and _says_more(f, w))]
    for e in evs[:20]:  # a bare exception line (a paste without its traceback) that says what was at fault
        fx = f.fields_of(e, "python.exception") or f.fields_of(e, "python.exception_named")
        said = classify_terminal(e.text, (), fx.get("exception"))
        if said:
            typed = said == by_type(fx.get("exception"))
            return [candidate("software.terminal_error", said[0], f"{said[1]}: {e.text.strip()[:160]}", 0.6, [e], f,
                              facts={"classified_by": "exception line without its traceback",
                                     **({"by_type": True} if typed else {})},
                              recommendations=["fix what the error names, then restart"])]
    if evs:
        return [candidate("software.exception", "software", evs[0].text.strip()[:160], 0.35, evs[:1], f)]
    cut = [t for t in tbs if "Original Traceback" not in t.text and not f.fields_of(t, "python.traceback").get("exception_text")]
    cut = cut or f.tails  # or only its frames: a paste that starts after the `Traceback` header
    if cut:  # a paste that stops inside its traceback: code raised, but the line naming what is not in the bundle
        return [candidate("software.traceback_cut", "software", "a stack trace whose exception line is not in the "
                          "bundle: the code raised, what it raised is cut off", 0.25, cut[:1], f,
                          recommendations=["get the end of the traceback (its last line names the exception)"])]
    return []


_WRAPPED_WITHIN = 60  # lines from the wrapper to the worker's own exception (its Original Traceback's frames)

def _wrapped(lines: list[int], evs: list[Evidence], line: int) -> Evidence | None:
    """The first exception line of `evs` (sorted, their line numbers `lines`) within _WRAPPED_WITHIN after `line`."""
    i = bisect_right(lines, line)
    return evs[i] if i < len(lines) and lines[i] <= line + _WRAPPED_WITHIN else None


def _noise(f: RuleInputs, text: str) -> bool:
    """Whether an upstream table calls the line noise: a banner shaped like an exception (JAX's
    `jax.errors.SimplifiedTraceback: For simplicity, JAX has removed its internal frames ...`, printed as the cause
    of every filtered traceback), not what was raised."""
    m = f.messages.best(strip_prefixes(text)) if f.messages is not None else None
    return m is not None and m.role == "noise"


def _says_more(f: RuleInputs, e: Evidence) -> bool:
    """Whether an exception line says what failed: the terminal table classifies it, or an upstream table documents
    it as a trigger. Remembered per message for the bundle (every rank of a job may print the same one)."""
    said: dict[str, bool] = f.__dict__.setdefault("_says_more", {})
    body = strip_prefixes(e.text)
    if body not in said:
        m = f.messages.best(body) if f.messages is not None else None
        said[body] = classify_terminal(e.text) is not None or (m is not None and m.role == "trigger" and bool(m.category))
    return said[body]


# c10d raising what NCCL returned (`DistBackendError: NCCL error in: ...NCCLUtils.hpp:317, remote process exited or
# there was a network error`): the NCCL rules read it (network, or a peer's exit); as "the first failing rank's
# exception" it would hide the traceback of the rank that failed on its own, which its survivors print before it
_NCCL_RAISED = re.compile(r"\bDistBackendError: NCCL error\b")



def _wraps_what_follows(f: RuleInputs, fx: dict, ev: Evidence, tbs: list[Evidence]) -> bool:
    """Whether this traceback's exception is a wrapper that its upstream's table calls a consequence, printed with the
    tracebacks it wraps right after it (DCP's `CheckpointException ranks:dict_keys([6])` followed by `Traceback ...
    (RANK 6)` and the rank's own `OSError: [Errno 5]`): the wrapped traceback is the cause, and is read next. The
    tracebacks' places are indexed once per RuleInputs (every rank of a large job may print the wrapper)."""
    if f.messages is None:
        return False
    starts = f.__dict__.get("_traceback_starts")
    if starts is None:
        starts = f.__dict__["_traceback_starts"] = {(t.file, t.line) for t in tbs}
    after = fx.get("exception_line", ev.line)
    if (ev.file, after + 1) not in starts and (ev.file, after + 2) not in starts:
        return False
    m = f.messages.best(strip_prefixes(fx.get("exception_text", "")))
    return m is not None and m.role == "cascade"


def _original_traceback(f: RuleInputs, ev: Evidence, fx: dict) -> Evidence | None:
    """The worker's own traceback that PyTorch prints under `Original Traceback (most recent call last):` right
    after the `Caught X in DataLoader worker` line, in the same file."""
    after = fx.get("exception_line", ev.line)
    best = None
    for t in f.hits("python.traceback"):
        if (t.file == ev.file and after < t.line <= after + 3 and "Original Traceback" in t.text
                and f.fields_of(t, "python.traceback").get("exception_text")):
            if best is None or t.line < best.line:
                best = t
    return best


# a message that lists what MIGHT have happened (Ray's raylet: `There are some potential root causes. (1) The process
# is killed by SIGKILL by OOM killer ... (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected
# errors.`): a word after such a hedge is one of the possibilities, not what the line reports
_HEDGE = re.compile(r"(?i)\b(?:potential|possible|probable) (?:root )?causes?\b|\b(?:may|might|could) (?:have )?be(?:en)? "
                    r"(?:caused|due)\b")
_CRASH_WORD = re.compile(r"Segmentation fault|SIGSEGV")


def _hedged(text: str) -> bool:
    """Whether the line's crash word only comes after a hedge (one of the causes it lists, not the one it reports)."""
    h, c = _HEDGE.search(text), _CRASH_WORD.search(text)
    return h is not None and c is not None and h.start() < c.start()


def native_crash(f: RuleInputs):
    evs = [e for e in f.hits("process.segfault") if not _hedged(e.text)] + f.hits("python.fatal_error") \
        + signalled_workers(f, 11)
    return [candidate("software.native_crash", "software", "a process crashed in native code (segfault / fatal error)", 0.5,
                      evs[:2], f, ranks=launcher_ranks(evs[:2]),
                      recommendations=["get a core dump or py-spy --native stack; check extension/CUDA versions"])] \
        if evs else []


def workers_failed(f: RuleInputs):
    """The launcher says workers failed and nothing more specific fires: the job did NOT end normally. Weak on
    purpose, so the answer is `inconclusive` and says what is missing, never `completed`."""
    evs = [e for e in f.hits("torchrun.exitcode", "torchrun.worker_failed", "torchrun.child_failed", "slurm.task_exit",
                             "slurm.failed") if f.fields_of(e, "torchrun.exitcode").get("exitcode", 1) != 0]
    if not evs:
        return []
    return [candidate("software.workers_failed", "software", "workers exited with errors, and no line in the bundle says "
                 "why", 0.2, evs[:2], f, ranks=[], nodes=[], facts={"fallback": True},
                 recommendations=["collect each failed rank's own stderr (torchrun --log-dir, or SLURM per-task "
                                  "output)"])]


RULES = [exception, native_crash, workers_failed]
