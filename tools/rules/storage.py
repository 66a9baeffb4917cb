"""Storage and I/O: loader errors from the object store, AIStore failure signatures, full disks, retries that
ran out. Connection resets that recover at the first retry are noise and never a candidate."""

from __future__ import annotations

from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.rules.base import HANDLED_STRENGTH, RuleInputs, candidate
from trainlog_debugger.tools.sources.generic import SURVIVED


# what the batch loader says it survived (tools/sources/generic.SURVIVED): evidence of the store's trouble, not an
# end of the job by itself
_SURVIVED = SURVIVED


def batch_loader(f: RuleInputs):
    evs = f.hits("loader.batch_loader_error")
    if not evs:
        return []
    raised = [e for e in evs if not any(s in e.text for s in _SURVIVED)]
    return [candidate("storage.batch_loader", "storage_io",
                      "the storage batch loader got fewer objects than requested" if raised else
                      "the storage batch loader fell back or skipped objects it could not fetch, and went on",
                      0.75 if raised else HANDLED_STRENGTH, (raised or evs)[:3], f,
                      recommendations=["check the AIStore targets for the failure window (resource pressure, "
                                       "shared-dm stream errors)"])]


def ais_signatures(f: RuleInputs):
    pids = ("ais.resource_pressure", "ais.out_of_bounds", "ais.shared_dm_error", "ais.out_of_space",
            "ais.memory_pressure")
    evs = f.hits(*pids)
    if not evs:
        return []
    nodes = f.nodes_of(evs)
    return [candidate("storage.ais", "storage_io", f"AIStore target(s) {', '.join(nodes[:4]) or '?'} under pressure / "
                 f"failing streams", 0.7, evs[:3], f, ranks=[], nodes=nodes,
                 recommendations=["relieve the target(s): disk/memory pressure, rebalance; then restart the job"])]


def disk_full(f: RuleInputs):
    evs = [e for e in f.hits("io.no_space") if "/dev/shm" not in e.text and "shm" not in e.text.lower()
           and not f.fields_of(e, "nccl.shm_no_space") and "posix_fallocate" not in e.text
           and "</torch_" not in e.text]  # PyTorch's own shared-memory segment (loader.torch_shm_full)
    if not evs:
        return []
    if all("quota" in e.text.lower() for e in evs):  # EDQUOT: the user's or project's quota, not the volume, is full
        return [candidate("storage.disk_full", "storage_io", "a disk quota was exceeded (Disk quota exceeded)", 0.85,
                          evs[:3], f, recommendations=["check the quota (`lfs quota -u $USER <mount>`, `quota -s`) and "
                                                       "free space under it or ask for more; or write to another "
                                                       "project's or scratch volume"])]
    return [candidate("storage.disk_full", "storage_io", "a disk filled up (No space left on device)", 0.85, evs[:3], f,
                 recommendations=["free space or point checkpoints/logs at a larger volume"])]


def retries_exhausted(f: RuleInputs):
    exhausted = {r: retry for r, rs in f.scan.ranks.items() if (retry := rs.retry) and retry["state"] == "exhausted"}
    if not exhausted:
        return []
    ranks = list(exhausted)
    r0 = exhausted[ranks[0]]
    # the line that prints the last attempt is the proof of "ran out" (a `retrying 4/5` line is not)
    evs = [e for e in f.hits("io.retrying") if e.rank in ranks]
    evs = sorted(evs, key=lambda e: -(f.fields_of(e, "io.retrying").get("attempt") or 0))
    last = [e for e in evs if e.rank is not None and (f.fields_of(e, "io.retrying").get("attempt") or 0)
            == exhausted[e.rank].get("max_attempt")]
    evs = (last or evs)[:2]
    tries = f" ({r0['max_attempt']}/{r0['max_attempts']})" if r0.get("max_attempts") else ""
    return [candidate("storage.retries_exhausted", "storage_io", f"retries ran out{tries} on rank(s) "
                 f"{', '.join(map(str, ranks[:8]))}", 0.55, evs, f, ranks=ranks,
                 recommendations=["check the storage endpoint those ranks read from"])] if evs else []


def io_errors(f: RuleInputs):
    """Timeouts and broken pipes, weakly storage's. A refused connection is not among them: nothing listened at the
    address it dialled (a coordinator, a rendezvous store, a peer not up yet), which TAXONOMY's start-up rule reads
    as config, network or infrastructure, never as the filesystem; io.connection_refused is network's own pattern
    and the lexicon reads such a line."""
    evs = f.hits("io.broken_pipe", "io.timed_out")
    return [candidate("storage.io_errors", "storage_io", "I/O errors (timeouts, broken pipes)", 0.3,
                 evs[:3], f)] if evs else []


def ais_chain(f: RuleInputs):
    """The storage chain across sources (tools/sources/ais/analyze.py): daemon pressure → stream breaks → out-of-bounds → aborted
    batch → short read on the client → loader error on a worker rank. It explains a straggler, so it is marked
    cross-source: the diagnosis prefers it to the worker-side view of the same story."""
    rep = f.ais
    if rep is None or not rep.chain:
        return []
    steps = [x for x in rep.chain if x.id != "ais.chain.nccl_cascade"]
    ranks = sorted({r for x in steps for r in x.ranks})
    evs = [x.evidence[0] for x in steps if x.evidence]
    hung = any(x.id == "ais.chain.nccl_cascade" for x in rep.chain)
    return [candidate("storage.ais_chain", "storage_io", f"storage chain from AIStore target(s) {', '.join(rep.pressured) or '?'}"
                 f" to rank(s) {ranks_str(ranks)}: " + steps[0].summary, 0.95, evs, f, status="hung" if hung else "crashed",
                 ranks=ranks, nodes=list(rep.pressured), restart="restart as is",
                 recommendations=[f"relieve the pressure on {', '.join(rep.pressured) or 'the target'} (disk/memory), "
                                  "then restart", "make the loader tolerate short batch reads (retry the missing objects "
                                  "with a timeout) instead of failing the rank"],
                 facts={"cross_source": True, "clock": rep.clock.summary if rep.clock else None}, story=steps)]


RULES = [batch_loader, ais_signatures, disk_full, retries_exhausted, io_errors, ais_chain]
