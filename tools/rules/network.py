"""Network and fabric: InfiniBand completion errors, socket errors, NCCL system errors, the all-ranks-waiting
fabric pattern, and NCCL failures with nothing else to explain them.

IB work-completion status decides the story (FORMATS.md §3.2): 4 = local protection error, usually PCIe ACS
redirecting GPUDirect RDMA traffic (a host configuration issue on every node, not one bad link); 12/13 = retries
exhausted (link, cable, switch or peer unreachable); 5 = flush after the queue pair already failed (secondary).
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.lines.attribution import attribute_line
from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.rules.base import RuleInputs, candidate, past_setup, restart_without, time_key
from trainlog_debugger.tools.rules.meaning import handled_per_table
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.sources.nccl.format import HOST_PID_ANY


def _status(f: RuleInputs) -> str:
    """A network fault shows as a hang when collectives then time out, as a crash when NCCL errors out first."""
    return "hung" if f.hits("pytorch.watchdog_timeout", "gloo.timeout") else "crashed"


def _common_peer_host(f: RuleInputs, evs, statuses, primary) -> str | None:
    """The host that owns the one peer address every primary completion error names (NCCL's bootstrap address of
    that host's processes, env.nccl_iface_using); None when the errors name several peers or the address is
    nobody's in the bundle."""
    peers = {str(f.fields_of(e, "nccl.ib_completion_error").get("peer") or "").split("<")[0]
             for e, s in zip(evs, statuses) if s == primary}
    if len(peers) != 1 or "" in peers:
        return None
    peer = next(iter(peers))
    hosts = {e.node or (m.group("host") if (m := HOST_PID_ANY.search(e.text)) else None)
             for e in f.hits("env.nccl_iface_using")
             if (fx := f.fields_of(e, "env.nccl_iface_using")).get("what") == "Bootstrap" and fx.get("addr") == peer}
    hosts.discard(None)
    return next(iter(hosts)) if len(hosts) == 1 else None


FLUSH = 5  # IBV_WC_WR_FLUSH_ERR: work requests flushed from a queue pair already in error (secondary)


def _reporter(f: RuleInputs, evs, statuses, primary) -> list[int]:
    """The one rank whose process saw the link fail first-hand (the first completion error that is not a flush,
    status 5, which only follows a queue pair already in error): its own line's rank, or the rank its process is
    known to be (RuleInputs.rank_of_pid: NCCL's WARN names its host and pid). [] when the primary errors come from
    more ranks than one: then the hosts are the suspects."""
    ranks = set()
    pairs = [(e, s) for e, s in zip(evs, statuses) if s == primary]
    own = [(e, s) for e, s in pairs if "NCCL WARN" in e.text]  # NCCL's own lines; c10d's quotes of them repeat them
    for e, _s in own or pairs:
        r = e.rank if e.rank is not None else f.rank_of_pid(e)
        if r is None:
            return []
        ranks.add(r)
    return sorted(ranks) if len(ranks) == 1 else []


def ib_completion(f: RuleInputs):
    evs = f.hits("nccl.ib_completion_error")
    if not evs:
        return []
    statuses = [f.fields_of(e, "nccl.ib_completion_error").get("status") for e in evs]
    primary = next((s for s in statuses if s != 5), statuses[0])
    ev0 = evs[statuses.index(primary)]
    nodes = f.nodes_of(evs)
    spread = f" on {len(nodes)} nodes at once" if len(nodes) > 1 else ""
    if primary == 4:
        return [candidate("network.ib_local_protection", "infrastructure",
                     f"IB local protection errors (status 4){spread}: GPUDirect RDMA is being blocked, typically by PCIe "
                     f"ACS on the hosts", 0.8, [ev0] + [e for e in evs if e is not ev0][:2], f, nodes=nodes,
                     recommendations=["confirm with NCCL_NET_GDR_LEVEL=0 (works but slower if ACS is the cause)",
                                      "disable PCIe ACS on the hosts' PCIe switches/bridges (BIOS or setpci)"])]
    # Only quoted as the last error of c10d's `ncclRemoteError` report ("remote process exited or there was a network
    # error": NCCL cannot tell which), never printed as NCCL's own WARN: what a surviving rank sees when its peer
    # PROCESS died (the peer's queue pair is gone, so the sends exhaust their retries, status 12). Another rank's own
    # failure then is the trigger and these its cascade, as for a socket whose peer closed (diagnose.pick); alone, it
    # stays the network reading.
    # reporters on several nodes whose errors all name one peer address: that peer's host is the suspect (every
    # reporter's queue pair to it failed), not the reporters
    peer_host = _common_peer_host(f, evs, statuses, primary) if len(nodes) > 1 else None
    if peer_host is not None:
        spread = f" on {len(nodes)} nodes, all toward {peer_host}"
        nodes = [peer_host]
    quoted = all("NCCL WARN" not in e.text and "NCCL INFO" not in e.text for e in evs)
    return [candidate("network.ib_completion", "network",
                 f"IB completion errors ({'status ' + str(primary) if primary is not None else 'no status stated'})"
                 f"{spread}: " +
                 ("retries exhausted, link or peer unreachable" if primary in (12, 13) else "transport failure"),
                 0.85 if primary in (12, 13) else 0.7, [ev0] + [e for e in evs if e is not ev0][:2], f, nodes=nodes,
                 # a flush (status 5, IBV_WC_WR_FLUSH_ERR) only: the queue pair was already in error (its peer's
                 # process exited, or a retry error elsewhere): what a survivor sees, like a quoted status 12
                 facts={"peer_closed": ranks_str({e.rank for e in evs if e.rank is not None}, cap=64)}
                 if (quoted and primary in (12, 13)) or primary == FLUSH else None,
                 status=_status(f),
                 # (a survivor's view, a flush or a quoted error, names no culprit rank: the peer is the suspect)
                 ranks=[] if (quoted and primary in (12, 13)) or primary == FLUSH else _reporter(f, evs, statuses, primary),
                 restart=restart_without(nodes[0]) if len(nodes) == 1 else "fix first",
                 recommendations=["check the IB links/cables and switch ports of the named hosts (ibstat, port counters)",
                                  "NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT only mask a flaky link"])]


# libibverbs' event names (ibv_event_type_str) that report a state change, not a fault: a port coming (back) up, an
# address or subnet-manager change, a queue's normal progress
_IB_EVENT_INFO = re.compile(r"(?i)^(?:port active|LID change|P_Key change|SM change|client reregistration|"
                            r"GID table change|communication established|send queue drained|path migrated|"
                            r"SRQ limit reached|last WQE reached)\b")


def ib_async(f: RuleInputs):
    """An HCA's asynchronous event, read by its name: a fault (`port error`, `local catastrophic error`, a work queue or
    CQ error) is the fabric's; a state change (`GID table change`, `port active`) is none. A port error that the
    same HCA's `port active` follows is a link flap that recovered: named, weakly (a job that finished survived it)."""
    evs = f.hits("nccl.ib_async_event")
    faults = []
    for e in evs:
        event = (f.fields_of(e, "nccl.ib_async_event").get("event") or "").strip()
        if not _IB_EVENT_INFO.match(event):
            faults.append((e, event))
    if not faults:
        return []
    up = [(e, f.fields_of(e, "nccl.ib_async_event").get("hca")) for e in evs
          if (f.fields_of(e, "nccl.ib_async_event").get("event") or "").strip().lower().startswith("port active")]
    recovered = all(any(hca == f.fields_of(e, "nccl.ib_async_event").get("hca") and e.file == u.file and u.line > e.line
                        for u, hca in up) for e, _ in faults)
    first = [e for e, _ in faults][:3]
    if recovered:
        return [candidate("network.ib_async", "network", "an InfiniBand port went down and came back up (a link flap "
                          "that recovered)", 0.45, first, f, status=_status(f),
                          recommendations=["check the HCA port's error counters and the switch port if it repeats"])]
    return [candidate("network.ib_async", "network", f"InfiniBand port event ({faults[0][1] or 'port error'})", 0.8,
                      first, f, status=_status(f), recommendations=["check the HCA port state and the switch"])]


# `Connect to 10.148.3.247<56821> failed : Connection refused`: the peer that refused or could not be reached is where
# to look (its process died, its port is closed, its link is down); the rank that printed it is the one left waiting
_PEER_REFUSED = re.compile(r"Connect to \[?([\w.:%-]+?)\]?<\d+> failed ?: ?(?:Connection refused|No route to host|"
                           r"Connection timed out|Network is unreachable|Host is unreachable)")


# what the receiving side of a socket sees when its PEER ended the connection (NCCL misc/socket.cc `socketProgress:
# Connection closed by remote peer`, a recv's `Connection reset by peer`): the peer's process exited, or its host
# reset the link. Either way the fault is on the other end.
_PEER_CLOSED = re.compile(r"Connection closed by remote peer|Connection reset by peer")


# a connect that found no path at all (EHOSTUNREACH, ENETUNREACH: no route from this host's interfaces to the address,
# or a firewall's reject), as against one the peer refused or reset
_NO_ROUTE = re.compile(r"failed ?: ?(?:No route to host|Network is unreachable|Host is unreachable)")
# addresses that name the host itself on every node: loopback, and Docker's default bridge (docker0 is 172.17.0.1
# on every Docker host). A peer reached at one of them across nodes was given the wrong interface's address
_HOST_LOCAL = re.compile(r"^(?:127\.\d+\.\d+\.\d+|::1|172\.17\.\d+\.\d+)$")


def _unroutable_at_setup(f: RuleInputs, evs: list[Evidence], peers: list[str]):
    """NCCL could not connect while it set up (no communicator complete, no end line) because the address it used does
    not route: every connect failed with no route, or the peer's address is one that names the host itself (loopback,
    Docker's bridge). TAXONOMY's start-up case: an address or interface that is wrong is `config`; a path that exists
    and breaks is `network`, which the socket reading stays for every other error. Why not the network: at set-up
    nothing has crossed the path yet, and NCCL picks the first interface that is up (docker0, a virtual bridge, a
    management NIC), which is NCCL's own FAQ for `No route to host`."""
    if past_setup(f):
        return None
    connects = [e for e in evs if _PEER_REFUSED.search(e.text)]
    if not connects:
        return None
    local = [p for p in peers if _HOST_LOCAL.match(p)]
    if not local and not all(_NO_ROUTE.search(e.text) for e in connects):
        return None
    why = (f"the peer address {local[0]} names the host itself on every node (loopback or Docker's bridge)" if local
           else "no route from this host's interfaces to " + (", ".join(peers[:3]) or "the peer"))
    return candidate("config.unroutable_address", "config",
                     f"NCCL could not connect while setting up its communicator: {why}: the address or interface "
                     f"NCCL chose does not route between the nodes", 0.7, connects[:2] + [e for e in evs if e not in
                                                                                           connects][:1], f,
                     ranks=[], nodes=[],
                     recommendations=["set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface that routes "
                                      "between the nodes (`ip -br addr`, `ip route get <peer address>` on each node); "
                                      "exclude docker0, lo and virtual bridges",
                                      "if the route exists, check the firewall between the nodes (a reject reads as "
                                      "`No route to host`)"])


def _after_the_peers_gave_up(f: RuleInputs, evs: list[Evidence]) -> bool:
    """Whether every close is dated after another rank's watchdog timed out (its `Watchdog caught collective
    operation timeout`): that rank then takes its process down, so the close is what its exit looks like from here,
    not a break of the network (the last rank to enter a collective the others gave up on)."""
    mine = {e.rank for e in evs}
    first = min((k for e in f.each("pytorch.watchdog_timeout") if e.rank not in mine and (k := time_key(e)) is not None),
                default=None)
    return first is not None and all((k := time_key(e)) is not None and k > first for e in evs)


def socket(f: RuleInputs):
    evs = f.hits("nccl.socket_error")
    if not evs:
        return []
    # only peers that closed: a consequence wherever another rank failed on its own (diagnose.pick)
    closed = all(_PEER_CLOSED.search(e.text) for e in evs)
    peers = list(dict.fromkeys(m.group(1) for e in evs if (m := _PEER_REFUSED.search(e.text))))
    reporters = set(f.nodes_of(evs))
    named = [p for p in peers if p not in reporters][:4]
    if (unroutable := _unroutable_at_setup(f, evs, peers)) is not None:
        return [unroutable]
    summary = "NCCL socket connection failures" + (f": {', '.join(named)} refused or could not be reached" if named
                                                   else "")
    return [candidate("network.socket", "network", summary, 0.65, evs[:3], f, status=_status(f),
                      nodes=named if named else None, ranks=[] if named else None,
                      facts={**({"unreachable_peers": named} if named else {}),
                             **({"consequence_only": True} if closed and _after_the_peers_gave_up(f, evs) else {}),
                             # the ranks that printed it, as ranges (`0-1364,1366-4095`: one short string at 10,000
                             # ranks, in the answer's JSON too)
                             **({"peer_closed": ranks_str({e.rank for e in evs if e.rank is not None}, cap=64)}
                                if closed else {})},
                      recommendations=(["check the node(s) that refused the connection first: is the job's process "
                                        "alive there, is its interface up (ip link, ibstat), is a firewall in the way"]
                                       if named else [])
                      + ["check NCCL_SOCKET_IFNAME points at a routable interface on every node, and "
                         "firewalls between nodes"])]


def nccl_error(f: RuleInputs):
    out = []
    evs = f.hits("pytorch.nccl_error_kind", "pytorch.nccl_error")
    kinds = [f.fields_of(e, "pytorch.nccl_error_kind").get("nccl_error") or f.fields_of(e, "pytorch.nccl_error").get("nccl_error", "")
             for e in evs]
    for kind, ev in zip(kinds, evs):
        if "SystemError" in kind or "system error" in kind:
            out.append(candidate("network.nccl_system_error", "network", "NCCL system error (socket or system call failed)",
                            0.6, [ev], f, recommendations=["run with NCCL_DEBUG=INFO; check NCCL_SOCKET_IFNAME and "
                                                           "the interfaces NCCL picked"]))
            break
        if "UnhandledCudaError" in kind or "unhandled cuda error" in kind:
            out.append(candidate("gpu.nccl_unhandled_cuda", "gpu_cuda", "NCCL hit a CUDA error", 0.6, [ev], f))
            break
        if "RemoteError" in kind or "remote process exited" in kind:
            # the rank that printed it saw its PEER fail: it is not the culprit
            out.append(candidate("network.nccl_remote", "network", "NCCL: a peer exited or the network failed", 0.45, [ev], f,
                            ranks=[],
                            recommendations=["look for the rank that exited first: a remote error is often a "
                                             "consequence of a crash elsewhere"]))
            break
    rc2 = [e for e in f.hits("nccl.error_return") if f.fields_of(e, "nccl.error_return").get("rc") == 2
           and any(k in f.fields_of(e, "nccl.error_return").get("where", "") for k in ("net", "socket"))]
    if rc2 and not out:
        out.append(candidate("network.nccl_system_error", "network", "NCCL's network transport returned a system error "
                        "(ncclSystemError) while connecting", 0.55, rc2[:2], f,
                        recommendations=["set NCCL_SOCKET_IFNAME to the routable interface (NCCL may be using docker or "
                                         "virtual bridges)", "run with NCCL_DEBUG=INFO to see the interfaces it chose"]))
    return out


def fabric(f: RuleInputs):
    if f.nccl is None or f.nccl.verdict != "fabric":
        return []
    evs = f.hits("pytorch.watchdog_timeout", "pytorch.watchdog_pg_status")[:3]
    if not evs:
        return []
    return [candidate("network.fabric", "network", f"all {f.nccl.with_state} ranks entered the collective and every watchdog "
                 f"fired: no straggler, the collective itself did not progress", 0.75, evs, f, status="hung",
                 ranks=[], nodes=[], recommendations=["check the network between the nodes (IB/RoCE links, switch, NIC "
                                                      "errors); run nccl-tests across the job's nodes"])]


# what NCCL or gloo say when the transport itself broke: the network reading stays (TAXONOMY lists the wording)
_TRANSPORT_WORDS = re.compile(r"remote process exited|network error|Connection reset|Connection closed|Broken pipe|"
                              r"unhandled system error|ncclSystemError|ncclRemoteError")


MAX_ABSENT = 2  # ranks not seen waiting that are named; more (or more absent than present) is a partial paste, no lead


def not_seen_waiting(f: RuleInputs) -> list[int]:
    """The ranks below the highest rank seen that have no line in the bundle, when every rank that has one was waiting
    in the collective and no more than MAX_ABSENT are absent. Why: the ranks the others wait for are the ones not
    waiting (protocol step 3), and a rank that was busy elsewhere (rank 0 evaluating, saving or scanning a dataset
    while the others entered the next collective) prints no timeout of its own: a paste of the timeouts is the
    others'. A rank below the highest one seen is a rank of the job for certain; whether it was busy or is only
    unposted, its log is what to read first. Never above the highest rank seen (the world size is not known), and
    never a verdict: the reading stays the weak fallback, and collective.missing_logs names them where a world size
    is stated."""
    rep = f.nccl
    if rep is None or rep.culprits or rep.suspects or not rep.missing_ranks or rep.with_state == 0:
        return []
    seen = [r for r, rs in rep.ranks.items() if rs.role != "missing"]
    if not seen or any(rep.ranks[r].role != "waiting" for r in seen):
        return []
    absent = [r for r in rep.missing_ranks if r < max(seen)]
    return absent if 0 < len(absent) <= MAX_ABSENT and len(absent) < len(seen) else []


DEFAULT_NCCL_TIMEOUT_MS = 600_000  # torch.distributed's default for NCCL process groups (10 min); others use 30 min
SHORT_TIMEOUT_MS = 300_000  # below every framework's default: a timeout someone set short on purpose


def _short_timeout(f: RuleInputs) -> tuple[int, Evidence] | None:
    """The watchdog's configured timeout (`WorkNCCL(..., Timeout(ms)=60000) ran for 66720 milliseconds`), with the
    line that states it, when every watchdog line states one and the largest is below SHORT_TIMEOUT_MS. Why a
    reading of its own: TAXONOMY's `a timeout too short for a known long phase` is config, and a collective
    timeout of one or two minutes is shorter than the phases every job has (the first iteration's compilation, a
    checkpoint save, an evaluation on one rank), whatever kept the rank busy this time."""
    got = []
    for e in f.hits("pytorch.watchdog_timeout"):
        ms = f.fields_of(e, "pytorch.watchdog_timeout").get("timeout_ms")
        if ms is None:
            return None
        got.append((ms, e))
    if not got:
        return None
    longest = max(got, key=lambda x: x[0])
    return longest if 0 < longest[0] < SHORT_TIMEOUT_MS else None


def nccl_only(f: RuleInputs):
    """NCCL (or gloo) failed and nothing else explains it: a weak hypothesis, never a confident one. Which one: a
    collective timeout is almost never its own cause (TAXONOMY), and the fabric is at fault only where every rank
    entered the collective and none completed (network.fabric proves that from the per-rank state). Without that
    proof, what TAXONOMY's edge cases say keeps the others waiting is a rank that never reached the collective:
    doing other work (evaluation or a save on one rank) or calling a different collective, `software`. A transport
    error among the lines (gloo's peer reads, NCCL's `remote process exited or there was a network error`, a system
    error) keeps the network reading."""
    evs = f.first(2, "pytorch.watchdog_timeout", "pytorch.nccl_ops_failed", "pytorch.process_down",
                  "pytorch.watchdog_thread_exception", "pytorch.comm_aborted", "gloo.timeout", "gloo.read_error",
                  "gloo.peer_closed")
    if not evs:
        return []
    transport = f.hits("gloo.read_error", "gloo.peer_closed") + [
        e for e in f.hits("pytorch.comm_aborted", "pytorch.nccl_error", "pytorch.nccl_error_kind")
        if _TRANSPORT_WORDS.search(e.text)]
    if not transport:
        absent = not_seen_waiting(f)
        who = (f"; rank(s) {ranks_str(absent)} printed nothing here while every other rank waited: the likeliest "
               f"to have been elsewhere" if absent else "")
        short = _short_timeout(f)
        category, what = "software", ("NCCL collectives failed or timed out and no line says why: a rank that never "
                                      "reached the collective (other work on one rank, or a different collective) is "
                                      "the usual cause; the fabric only if every rank entered it")
        if short is not None:
            category, what = "config", (
                f"NCCL collectives timed out after {short[0] / 1000:g} s (Timeout(ms)={short[0]}), a timeout set far "
                f"below every framework's default (PyTorch's NCCL {DEFAULT_NCCL_TIMEOUT_MS // 60000} min, DeepSpeed's "
                f"and Lightning's 30 min): a phase longer than that on one rank (a save, evaluation, data preparation, "
                f"compilation) trips it while nothing else is wrong")
            evs = [short[1]] + [e for e in evs if e != short[1]]
        return [candidate("collective.timeout_only", category, what + who, 0.3,
                          evs[:2], f, status="hung", ranks=absent, nodes=[],
                          facts={"fallback": True, "timeout_ms": short[0] if short else None},
                          recommendations=(["raise the process group's timeout (init_process_group(timeout=...), the "
                                            "framework's distributed timeout option) above the longest phase one rank "
                                            "runs alone, or move that phase out of the collective's way"]
                                           if short else []) + ([f"collect the log (or a py-spy dump while stuck) of "
                                                                 f"rank(s) {ranks_str(absent)} first"] if absent else [])
                          + ["collect every rank's log, or its py-spy dump while stuck: the rank that is "
                             "not in the collective, and what it is doing, is the cause",
                             "if every rank entered it (TORCH_NCCL_TRACE_BUFFER_SIZE, the watchdog's "
                             "last enqueued/completed work): check the fabric with nccl-tests"])]
    return [candidate("network.nccl_failure", "network", "NCCL collectives failed or timed out with no other trigger in the "
                 "logs", 0.3, evs[:2], f, status="hung", ranks=[], nodes=[], facts={"fallback": True},
                 recommendations=["collect every rank's log (a straggler or crash on one rank is the usual cause)",
                                  "if it fails at the first collective on multiple nodes: check the inter-node transport "
                                  "(NCCL_DEBUG=INFO; NCCL_IB_DISABLE=1 as a test when there is no working IB)"])]


# NCCL prints `<source file>:<line> NCCL WARN <text>`; the source file says which subsystem failed, and so what was at
# fault (../shared/TAXONOMY.md), for the WARN lines no specific pattern reads. Longest prefix wins.
NCCL_SUBSYSTEMS = (
    ("transport/net_ib", "network", "the InfiniBand/RoCE transport"),
    ("misc/ibvwrap", "network", "the InfiniBand verbs library"),
    ("misc/ibvsymbols", "network", "the InfiniBand verbs library"),
    ("transport/net_socket", "network", "the socket transport"),
    ("transport/net", "network", "the network transport"),
    ("misc/socket", "network", "a socket between ranks"),
    ("bootstrap", "network", "the bootstrap connection between ranks"),
    ("proxy", "network", "the network proxy thread"),
    ("transport/shm", "infrastructure", "shared memory (/dev/shm)"),
    ("include/shm", "infrastructure", "shared memory (/dev/shm)"),
    ("misc/shmutils", "infrastructure", "shared memory (/dev/shm)"),
    ("transport/nvls", "infrastructure", "NVLink SHARP (fabric manager)"),
    ("misc/cudawrap", "gpu_cuda", "the CUDA driver"),
    ("misc/nvmlwrap", "gpu_cuda", "the GPU management library (NVML)"),
    ("graph/", "software", "NCCL's own topology detection (a library bug or an unsupported topology for this NCCL)"),
)


def nccl_subsystem(f: RuleInputs):
    """An NCCL WARN that no specific pattern reads, attributed by the NCCL source file that printed it. Weak on its
    own (a WARN is not always fatal): it decides only when nothing stronger is in the logs. A WARN that NCCL's own
    table documents as handled (a setting capped, a fallback taken: noise or context) is not read."""
    warns = f.hits("nccl.warn")
    for ev, handled in zip(warns, handled_per_table(f, warns)):
        if handled:
            continue
        src = f.fields_of(ev, "nccl.warn").get("file") or ""
        hit = max((row for row in NCCL_SUBSYSTEMS if src.startswith(row[0]) or f"/{row[0]}" in src),
                  key=lambda row: len(row[0]), default=None)
        if hit:
            prefix, category, what = hit
            return [candidate("network.nccl_subsystem", category, f"NCCL warned from {what} ({src})", 0.55, [ev], f,
                              facts={"nccl_source": src},
                              recommendations=["rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH) to see what "
                                               "NCCL tried just before", "compare the NCCL version with one known to work "
                                               "on this system (the container's bundled NCCL can be replaced)"])]
    return []


# an NCCL INFO line printed while a communicator is being set up (bootstrap, transports, topology, channels), as
# opposed to the lines that end a setup (`Init COMPLETE`) or a communicator (destroy, abort, a closed connection)
_NCCL_INFO = re.compile(r"\bNCCL INFO\b")
_SETUP_DONE = re.compile(r"Init COMPLETE|[Dd]estroy|[Aa]bort|[Cc]onnection closed|[Ff]inalize")


def stops_in_nccl_setup(f: RuleInputs) -> list[Evidence]:
    """Each log's last line when every log stops on an NCCL INFO line of communicator setup and nothing shows the
    job past forming its process group; [] otherwise. The shape of a set-up that never finished (NCCL prints no
    error while its connections wait), read by the rules that explain why."""
    last = f.last_lines()
    if not last or not all(_NCCL_INFO.search(e.text) and not _SETUP_DONE.search(e.text) for e in last):
        return []
    return [] if past_setup(f) else last


def stopped_in_nccl_setup(f: RuleInputs):
    """Every log stops on an NCCL INFO line of communicator setup (bootstrap, NET/IB, NET/Socket, rings...) and no
    rank shows the communicator ready: the processes never got past connecting to each other. NCCL prints no
    error when its bootstrap or transport connections wait forever (a firewall dropping the traffic, an interface
    that does not route between the ranks), so this shape is the evidence. Weak on its own (a paste can stop
    anywhere): the answer stays `inconclusive` and names what would decide it."""
    last = stops_in_nccl_setup(f)
    if not last:
        return []
    nodes = list(dict.fromkeys(n for e in last if (n := e.node or attribute_line(e.text).node)))
    return [candidate("network.stopped_in_nccl_setup", "network",
                      f"every log ({len(last)}) stops while NCCL sets up its communicator (bootstrap / transport "
                      "connections), and no rank reports it ready: the ranks could not connect to each other", 0.45,
                      last[:8], f, status="hung", nodes=nodes,
                      recommendations=["check that the interface NCCL picked (the `Bootstrap : Using` / `NET/Socket : "
                                       "Using` lines) routes between all ranks and is not blocked by a firewall "
                                       "(iptables, security groups); set NCCL_SOCKET_IFNAME to one that does",
                                       "on one node, NCCL_SOCKET_IFNAME=lo isolates the fault to the interface",
                                       "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET and run "
                                       "nccl-tests (all_reduce_perf) on the same ranks"])]


RULES = [ib_completion, ib_async, socket, nccl_error, fabric, nccl_subsystem, stopped_in_nccl_setup, nccl_only]
