"""Hangs decided by the collective analysis (tools/sources/pytorch/collectives.py): the rank that never entered, and what it did last.

A never-entered rank was stuck outside NCCL. Its own last lines say where: storage errors → storage_io; data
loading (escalating retries, loader, shard, dataset) → data_loading_stall; checkpoint save → storage_io. A crash
on the culprit is left to the crash rules; the culprit set is what this rule adds to them.
"""

from __future__ import annotations

import re
from collections import Counter

from trainlog_debugger.tools.lines.attribution import strip_prefixes
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.rules.base import RuleInputs, by_time, candidate
from trainlog_debugger.tools.sources.generic import SURVIVED

_DATA = re.compile(r"(?i)data ?loader|dataset|loading|shard|lhotse|fetch|prefetch|batch|sampler|\.tar\b|read timed out")
# work that one rank does alone while the others wait (TAXONOMY edge case: software): evaluation, metrics, logging,
# sample generation. Checked before _DATA: a validation loop's own progress lines say "batch" and "DataLoader".
# (not HF datasets' `Generating train split:`, a dataset being prepared)
_ASYM = re.compile(r"(?i)\b(?:validat(?:ion|ing|e)|evaluat(?:ion|ing|e)|eval(?:uation)?[ _](?:loop|step|batch|epoch|loss)|"
                   r"eval(?=[-:])|generation|generating(?=:)|"  # a generation loop's bar (`Generating: 43%|`),
                   r"running eval|test(?:ing)? (?:loop|batch|step)|comput(?:e|ing) metrics|generat(?:e|ing) samples|"
                   r"wandb|tensorboard|mlflow|profil(?:er|ing)|exporting)\b")
# "building train, validation, and test datasets": preparing data, not evaluating
_BUILD = re.compile(r"(?i)\b(?:build(?:ing)?|load(?:ing)?|index(?:es)?|indices|shards?|datasets?)\b")
_CKPT = re.compile(r"(?i)checkpoint|saving|save_checkpoint|\.distcp|torch\.save")
# preprocessing that one rank runs while the others wait in a barrier (TAXONOMY edge case: software): HF datasets'
# map/filter progress (`Running tokenizer on dataset`, `Map (num_proc=16):`), tokenizing, grouping texts
_PREPROC = re.compile(r"(?i)running tokenizer|\btokeniz(?:ing|e)\b|\b(?:Map|Filter)(?: \(num_proc=\d+\))?:|"
                      r"\bpre-?process(?:ing)?\b|grouping texts")
# a long phase every rank goes through (loading a model's weight shards, compiling), which outlasted the collective
# timeout (TAXONOMY edge case: config): checked before _CKPT, which reads "checkpoint" as a save
# Megatron's dataset index cache, which one rank builds by design while the others wait to load it
# (megatron/core/datasets/gpt_dataset.py: `Build and save the GPTDataset train indices`), is such a phase too
_PHASE = re.compile(r"(?i)loading checkpoint shards|\bcompiling\b|\bautotun(?:e|ing)\b|"
                    r"\bBuild and save the \w+ \w+ indices\b")
# a tqdm bar at its end (`Epoch 0: 100%|██████████| 1187/1187 [12:04<00:00, ...]`): the rank left its loop, which the
# others, stuck in the next collective, had not (TAXONOMY's data: uneven shards make ranks run different numbers of
# steps). Checked after the one-rank work above (an evaluation bar at its end is that work's)
_FINISHED_BAR = re.compile(r"\b100%\|[^|\n]{0,80}\| *(\d{1,12})/\1\b")
_STORAGE_PIDS = ("loader.batch_loader_error", "ais.resource_pressure", "ais.out_of_bounds", "ais.shared_dm_error",
                 "io.no_space")


def _retry_state(f: RuleInputs, rank: int) -> str | None:
    """Where the scan's retry escalation for `rank` ended ('exhausted', 'escalating', ...); None without retries."""
    rs = f.scan.ranks.get(rank)
    return rs.retry["state"] if rs and rs.retry else None


# where a main thread waits inside a library or the interpreter, not in the program's own code (py-spy's short file
# names and faulthandler's full paths)
_LIBRARY = re.compile(r"(?:^|/)(?:site-packages|dist-packages|torch|threading\.py|socket\.py|ssl\.py|selectors\.py|"
                      r"queue\.py|multiprocessing|concurrent|asyncio|http|urllib3?|requests|fsspec|s3fs|gcsfs|botocore|"
                      r"subprocess\.py|<frozen)")


def _own_stack(f: RuleInputs, rank: int):
    """(category, what it was doing, strength, the frame that says so) from the straggler's own stack dump, outside a
    collective: the pyspy reader's readings of its frames (reading data, saving, evaluating), else, when its
    innermost frame is in the program's own code and no frame of it reads data, `software` (a rank stuck in its own
    code: a lock it re-entered, a loop); None without such a dump."""
    from trainlog_debugger.tools.sources.pyspy.report import WHERE, telling_frame
    st = next((s for s in f.stacks if s.rank == rank and s.frames and not s.in_collective()), None)
    if st is None:
        return None
    text = " ".join(f"{fn} {w}" for fn, w, _ in st.frames[:12])
    for rx, cat, what, strength in WHERE:
        if rx.search(text):
            return cat, what, strength, telling_frame(st)
    fn, where, ev = st.frames[0]
    if _LIBRARY.search(where):
        return None
    return "software", f"stuck in the program's own code ({fn} at {where})", 0.65, ev


def _kind_of_work(text: str) -> bool:
    """Whether a line says what kind of work it is (one of the readings of `straggler`)."""
    return any(rx.search(text) for rx in (_ASYM, _PREPROC, _PHASE, _FINISHED_BAR, _CKPT, _DATA))


def _own_trigger(f: RuleInputs, rank: int):
    """(table row, line) of the latest of the rank's own last lines (its activity) that an upstream table calls a
    trigger with a category (torchtitan's `Ran out of data; last step was canceled.` on the one rank whose shard ran
    dry): what the rank itself said before it stopped entering collectives. None without such a line."""
    if f.messages is None:
        return None
    for e in f.activity.get(rank, []):  # the latest first
        m = f.messages.best(strip_prefixes(e.text))
        if m is not None and m.role == "trigger" and m.category:
            return m, e
    return None


def straggler(f: RuleInputs):
    rep = f.nccl
    if rep is None or rep.verdict not in ("straggler", "gloo_straggler"):
        return []
    culprits = [r for r in rep.culprits if rep.ranks[r].role in ("never_entered", "behind")]
    if not culprits:
        return []
    r0 = culprits[0]
    rs = rep.ranks[r0]
    stored = [e for p in _STORAGE_PIDS for e in f.hits(p) if e.rank in culprits]
    # a loader that fell back and went on (tools/sources/generic.SURVIVED) was still reading: a stall's sign, not
    # a storage failure of its own
    own = [e for e in stored if not any(w in e.text for w in SURVIVED)]
    fell_back = [e for e in stored if e not in own]
    retries = [e for e in f.hits("io.retrying") if e.rank in culprits]
    exhausted = [r for r in culprits if _retry_state(f, r) in ("exhausted", "escalating")]
    did = [e for e in f.activity.get(r0, []) if _kind_of_work(e.text)]
    last = did[0].text if did else rs.last_line.text if rs.last_line else ""
    ev = ([own[0]] if own else []) + ([retries[-1]] if retries and not own else []) + did[:1] + rs.cited(2)
    who = f"rank{'s' if len(culprits) > 1 else ''} {', '.join(map(str, culprits[:8]))}"
    base = (f"{who} never entered the stuck collective ({rep.found_ranks} ranks checked, "
            f"{len(culprits)} differ): stuck outside NCCL")
    said = _own_trigger(f, r0)
    if own:
        cat, why, s = "storage_io", f"{base}, after storage errors on the same rank", 0.85
    elif said is not None:  # what the rank itself said went wrong before it stopped (an upstream table's trigger)
        row, line = said
        cat, why, s = row.category, f"{base}: before it stopped it said: {row.meaning} ({row.table})", 0.75
        ev = [line] + [e for e in ev if e is not line]
    elif exhausted or (retries and _DATA.search(retries[-1].text)):
        cat, why, s = "data_loading_stall", f"{base}, in data loading (its reads were retrying)", 0.85
    elif fell_back:
        cat, why, s = "data_loading_stall", f"{base}, in data loading (its batch reads timed out and fell back)", 0.8
        ev = fell_back[-1:] + [e for e in ev if e is not fell_back[-1]]
    elif _ASYM.search(last) and not _BUILD.search(last):
        cat, why, s = "software", (f"{base}: it was doing work the others did not (its last line: evaluation, metrics "
                                   f"or logging on {'these ranks' if len(culprits) > 1 else 'one rank'} only) while "
                                   f"they waited in the collective"), 0.75
    elif _PREPROC.search(last):
        cat, why, s = "software", (f"{base}: it was preprocessing data alone (its last line: tokenizing or mapping a "
                                   f"dataset) while the others waited in the collective"), 0.7
    elif _PHASE.search(last):
        cat, why, s = "config", (f"{base}: it was still in a long phase (its last line: loading weight shards, "
                                 f"compiling or building a dataset's index) when the collective's timeout ran out"), 0.65
    elif (bar := _FINISHED_BAR.search(last)) is not None:
        cat, why, s = "data", (f"{base}: its progress bar had reached its end ({bar.group(1)} of {bar.group(1)}) while "
                               f"the others were still in the loop: it ran out of batches first (uneven data across "
                               f"ranks)"), 0.7
    elif _CKPT.search(last):
        cat, why, s = "storage_io", f"{base}, while saving a checkpoint (its last line)", 0.75
    elif _DATA.search(last):
        cat, why, s = "data_loading_stall", f"{base}, in data loading (its last line)", 0.8
    elif (dump := _own_stack(f, r0)) is not None:
        cat, what, s, frame = dump
        ev = ev[:1] + [frame] + ev[1:]
        why = f"{base}: its stack dump shows it {what}"
    else:
        cat, why, s = "data_loading_stall", f"{base}; its last line does not say what it was doing", 0.6
    recs = {"config": ["raise the process group's timeout (init_process_group(timeout=...), the trainer's "
                       "ddp_timeout / dist_timeout) above the phase's length, or shorten the phase",
                       "check whether this rank is slower at it than the others (its storage or CPU)"],
            "storage_io": ["check the storage backend for the window before the hang (AIStore: `ais log get cluster`)",
                           "add timeouts and bounded retries to the loader's reads"],
            "software": ["run that work on every rank, or make the others wait for it outside the collective "
                         "(a barrier with a timeout long enough for it), or move it off the training loop",
                         "if it must run on one rank, raise the collective timeout above its length"],
            "data_loading_stall": ["put a timeout on data reads (a read with no timeout blocks the rank forever)",
                                   f"inspect rank {r0}'s data shard / loader worker at the time of its last line",
                                   "a py-spy dump of the stuck rank shows the exact frame next time"]}.get(cat) \
        or [said[0].action if said is not None else "read the rank's own last lines for what it was doing"]
    return [candidate("collective.straggler", cat, why, s, ev, f, status="hung", ranks=culprits,
                 nodes=[n for r in culprits if (n := rep.ranks[r].node)],
                 restart="fix first" if cat == "software" else "restart as is",
                 recommendations=recs, facts={"nccl_verdict": rep.verdict})]


def stack_outlier(f: RuleInputs):
    """Stack dumps of a hung job, STAT-style (tools/sources/pyspy): most processes inside a collective and a few
    elsewhere: those few never reached it, and their own frames say what they were doing (reading data, saving a
    checkpoint, evaluating alone). Every process inside the same collective: nobody is missing, suspect the
    fabric (weak: the dumps cannot see the network)."""
    if not f.stacks:
        return []
    from trainlog_debugger.tools.sources.pyspy.report import group, minority, telling_frame
    got = minority(f.stacks)
    if got is not None:
        odd, major, cat, what, strength = got
        ranks = odd.ranks
        who = f"rank{'s' if len(ranks) > 1 else ''} {ranks_str(ranks)}" if ranks else f"{len(odd.stacks)} process(es)"
        evs = [telling_frame(s) for s in odd.stacks[:2]] + [major.stacks[0].frames[0][2]]
        return [candidate("collective.stack_outlier", cat,
                          f"stack dumps: {len(major.stacks)} processes in {major.describe()}; {who} in "
                          f"{odd.describe()}: never reached the collective, {what}", strength, evs, f, ranks=ranks,
                          nodes=sorted({s.node for s in odd.stacks if s.node}), status="hung",
                          restart="fix first" if cat == "software" else "restart as is",
                          recommendations=[f"read {who}'s full stack in the dump ({evs[0].cite()}): its innermost frames "
                                           f"are where it waits", "give that wait a timeout so it fails loudly "
                                           "next time"])]
    groups = group(f.stacks)
    if len(groups) == 1 and len(f.stacks) >= 2 and all(s.in_collective() for s in f.stacks):
        g = groups[0]
        return [candidate("collective.stacks_all_in_collective", "network",
                          f"stack dumps: all {len(f.stacks)} processes are inside {g.describe()}: every rank "
                          f"reached the collective and none completed it", 0.45,
                          [g.stacks[0].frames[0][2]], f, ranks=[], nodes=[], status="hung",
                          recommendations=["check the fabric between the nodes (NCCL_DEBUG=INFO, ibstat, nccl-tests)"])]
    return []


def mismatch(f: RuleInputs):
    evs = f.hits("pytorch.collective_mismatch", "gloo.size_mismatch")
    if not evs:
        return []
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: each rank names itself and the rank it disagrees with; the rank that most
    # others name, and that names others, is the odd one out
    named = Counter(other for e in evs
                    if (other := f.fields_of(e, "pytorch.collective_mismatch").get("other_rank")) is not None)
    odd = [r for r, n in named.items() if n == max(named.values()) and n >= 2] if named else []
    return [candidate("collective.mismatch", "software", "ranks issued different collectives (a rank-dependent or "
                 "time-dependent code path around a collective)" + (f"; rank {odd[0]} is the odd one out" if len(odd) == 1
                                                                    else ""), 0.8, evs[:2], f, ranks=odd[:1],
                 recommendations=["make every rank take the same branch around collectives (e.g. broadcast the "
                                  "decision from rank 0 instead of computing it per rank)"])]


def desync(f: RuleInputs):
    evs = f.hits("pytorch.desync_lagging")
    if not evs:
        return []
    lag = f.fields_of(evs[0], "pytorch.desync_lagging").get("lagging", "")
    ranks = [int(x) for x in re.findall(r"\d+", lag)]
    return [candidate("collective.desync", "data_loading_stall", f"desync debug names lagging rank(s) {lag}", 0.7, evs[:1],
                 f, status="hung", ranks=ranks, nodes=[],
                 recommendations=[f"inspect what rank(s) {lag} were doing before the timeout"])]


MAX_NAMED_SUSPECTS = 64


def missing_logs(f: RuleInputs):
    """Every rank with a log was waiting, and some ranks have no log: those are the only ones not seen waiting.
    Not proof (hence below the decisive threshold): the diagnosis stays inconclusive and asks for their logs."""
    rep = f.nccl
    if rep is None or not rep.suspects or rep.culprits:
        return []
    evs = f.hits("pytorch.watchdog_timeout", "pytorch.watchdog_pg_status", "gloo.timeout")[:2]
    if not evs:
        return []
    return [candidate("collective.missing_logs", "data_loading_stall",
                 f"every rank with a log was waiting in the collective; rank(s) {ranks_str(rep.suspects)} have no log "
                 f"and are the only ones not seen waiting", 0.4, evs, f, status="hung",
                 # a few missing ranks are suspects by name; a world of them names nobody (a claimed world size of
                 # 1,000,000 with two logs made 999,998 "culprits", 7.9 MB of JSON)
                 ranks=list(rep.suspects) if len(rep.suspects) <= MAX_NAMED_SUSPECTS else [],
                 nodes=[], recommendations=[f"collect the logs of rank(s) {ranks_str(rep.suspects)}: one of them "
                                            f"most likely never entered the collective"])]


def flight_recorder(f: RuleInputs):
    """Flight-recorder dumps name the ranks that never joined the stuck collective, or that issued a different
    one, per process group (tools/sources/flight_recorder/analyze.py): the same roles as the text logs, from the dumps' own records."""
    if f.fr is None:
        return []
    out = []
    for fd in f.fr.findings():
        if fd.role.value != "root_candidate":
            continue
        if fd.id == "fr.missing_ranks":
            out.append(candidate("collective.fr_never_joined", "data_loading_stall", fd.summary, 0.8, fd.evidence, f,
                            status="hung", ranks=fd.ranks, nodes=fd.nodes,
                            recommendations=["look at what those ranks were doing when the others entered the "
                                             "collective (their last log lines, a py-spy dump)"]))
        elif fd.id == "fr.mismatch":
            out.append(candidate("collective.fr_mismatch", "software", fd.summary, 0.8, fd.evidence, f, status="hung",
                            ranks=fd.ranks, nodes=fd.nodes,
                            recommendations=["make every rank issue the same collectives with the same sizes and "
                                             "dtypes in the same order"]))
    return out


def op_differs(f: RuleInputs):
    """Ranks timed out on the same sequence number of the same process group, but the collective they were in
    differs (op type or element count): they issued different collectives, so the program took different paths
    on different ranks (TAXONOMY `software`: mismatch / desync). The ranks in the minority are the odd ones out.
    Needs the watchdog's `OpType=`/`NumelIn=` on at least two ranks."""
    rep = f.nccl
    if rep is None:
        return []
    by_key: dict[tuple, dict[tuple, list[int]]] = {}
    evs: dict[int, Evidence] = {}
    for r, rs in rep.ranks.items():
        for p in rs.pgs.values():
            if p.seq is None or p.op is None or not p.self_detected:
                continue
            by_key.setdefault((p.desc or p.pg, p.seq), {}).setdefault((p.op, p.numel), []).append(r)
            if p.evidence:
                evs.setdefault(r, p.evidence[0])
    for (pg, seq), shapes in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        if len(shapes) < 2:
            continue
        ordered = sorted(shapes.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))
        major, minor = ordered[0], ordered[1:]
        odd = sorted(r for _, rs in minor for r in rs)
        if len(odd) >= len(major[1]):  # no majority: say so, blame nobody
            odd = []
        cited = [evs[r] for r in ([major[1][0]] + [rs[0] for _, rs in minor]) if r in evs]
        desc = "; ".join(f"{op} of {n if n is not None else '?'} elements on rank(s) {ranks_str(rs)}"
                         for (op, n), rs in ordered[:4])
        what = f"ranks timed out in different collectives at the same sequence number {seq} ({desc})"
        said = _why_it_left(f, odd, evs)
        if said is not None:  # the odd rank said why it left the others' path: that is the cause, the mismatch its sign
            row, line = said
            return [candidate("collective.op_differs", row.category, f"{what}: before it left the others' path, rank "
                              f"{line.rank} said: {row.meaning} ({row.table})", 0.75, [line] + cited, f,
                              ranks=odd[:64], status="hung", recommendations=[row.action],
                              facts={"upstream": row.cite(), "template": row.template})]
        return [candidate("collective.op_differs", "software", f"{what}: a rank-dependent code path around a collective",
                          0.7, cited, f, ranks=odd[:64], status="hung",
                          recommendations=["find the branch that differs between ranks around this collective (a "
                                           "condition on rank, on data or on time); TORCH_DISTRIBUTED_DEBUG=DETAIL "
                                           "names the mismatch at the first differing call"])]
    return []


def _why_it_left(f: RuleInputs, odd: list[int], timed_out: dict[int, Evidence]):
    """(table row, line): the first error-level line of an odd rank, before its own timeout, that an upstream table
    calls a trigger with a category (HF Trainer's `There seems not to be a single sample in your epoch_iterator` on
    the one rank whose shard ran dry, which then went to the end-of-training barrier while the others waited in the
    next step's all-reduce: TAXONOMY's data, uneven shards). Why: the collectives differ BECAUSE that rank left the
    loop; without such a line the differing path is the program's (software). None when no odd rank says so."""
    from trainlog_debugger.tools.rules.meaning import tables_of, error_lines
    if f.messages is None or not odd:
        return None
    lines = error_lines(f)
    rows = tables_of(f, lines)
    # what every rank printed (a start-up warning) says nothing of why the odd ones left: only a row no other rank
    # printed counts
    others = {m.id for e, m in zip(lines, rows) if m is not None and e.rank is not None and e.rank not in odd}
    for e, m in zip(lines, rows):
        if e.rank not in odd or m is None or m.role != "trigger" or not m.category or m.id in others:
            continue
        end = timed_out.get(e.rank) if e.rank is not None else None
        if end is not None and by_time(e) > by_time(end):
            continue
        return m, e
    return None


# the store's own words when a key never came (TCPStore.cpp doWait): the store answered, the root never published.
# Before torch 2.0 the client waited for the key in a blocking recv with the store's timeout as the socket's
# (TCPStore::doWait: setSocketTimeout, send WAIT, recvValue), so the same wait ended as c10d/Utils.hpp recvBytes'
# `Socket Timeout`: connected, asked, never answered; a store that could not be reached fails at connect instead
_STORE_WAITED = re.compile(r"wait timeout after \d+ ?ms|Wait timeout|Socket Timeout")


def unique_id_root(f: RuleInputs):
    """Ranks waited in the c10d store for the NCCL unique id that their group's root publishes when it reaches the
    first collective (ProcessGroupNCCL::broadcastUniqueNCCLID: `[3] is setting up NCCL communicator and retrieving
    ncclUniqueId from [0] ...`), and the root printed no error of its own. Why the root: the waiting ranks name it,
    and PyTorch's own message says why it would not come ("a possible application crash on rank 0"); a root still
    busy elsewhere (loading weights, tokenizing or evaluating on rank 0 alone past the process group's timeout) is
    TAXONOMY's `software` edge case, like a rank that never reached a collective. Weak (inconclusive): the root's log
    decides. A store that could not be reached or went away (`Connection reset`, `Connection refused`) is not this
    reading: the store answered when it says it waited for the key (`wait timeout`, or before torch 2.0 the blocking
    wait's `Socket Timeout`), or when the paste cut the store's error off."""
    pid = "pytorch.unique_id_wait"
    evs = f.hits(pid)
    if not evs:
        return []
    fields = [f.fields_of(e, pid) for e in evs]
    roots = {x["root"] for x in fields if isinstance(x.get("root"), int)}
    errors = [x.get("error") or "" for x in fields]
    if len(roots) != 1 or any(err and not _STORE_WAITED.search(err) for err in errors):
        return []
    root = roots.pop()
    if any(root in s.rank_counts for s in f.summaries.values() if s.role == "root_candidate" and s.tier in (1, 2)):
        return []  # the root's own error is the story: the rules that read it decide
    waiting = sorted({x["waiting"] for x in fields if isinstance(x.get("waiting"), int)})
    return [candidate("collective.unique_id_root", "software",
                      f"rank(s) {ranks_str(waiting) if waiting else '?'} waited for the NCCL unique id that rank {root} "
                      f"publishes at its first collective, and it never came: rank {root} was elsewhere (a long phase "
                      f"on it alone: loading, tokenizing, evaluation) or died before it", 0.4, evs[:2], f,
                      ranks=[root], nodes=[], status="hung",
                      recommendations=[f"read rank {root}'s log for what it was doing (or its crash) when the others "
                                       f"started waiting",
                                       f"if rank {root} alone runs a long phase before the first collective (weights, "
                                       "dataset tokenizing), raise the process group timeout (init_process_group("
                                       "timeout=...), the framework's ddp_timeout) or run the phase on every rank"])]


RULES = [stack_outlier, straggler, mismatch, desync, missing_logs, flight_recorder, op_differs, unique_id_root]
