"""Configuration mistakes: ports, rendezvous, mismatched NCCL versions, and the printed settings themselves (a
variable nobody reads, an interface that does not exist, a timeout left at its default under a long phase)."""

from __future__ import annotations

import re

from trainlog_debugger.tools.model import Evidence
from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.rules.base import RuleInputs, candidate, past_setup, time_key
from trainlog_debugger.tools.rules.network import stops_in_nccl_setup
from trainlog_debugger.tools.sources.env_names import CHECKED_PREFIXES, FOREIGN_PREFIXES, KNOWN
from trainlog_debugger.tools.sources.hw.format import NCCL_TESTS


def port_in_use(f: RuleInputs):
    evs = f.hits("torchrun.address_in_use")
    if not evs:
        return []
    addr = f.fields_of(evs[0], "torchrun.address_in_use").get("address", "the rendezvous port")
    return [candidate("config.port_in_use", "config", f"the rendezvous/store port is already in use ({addr}): another job or "
                 f"a leftover process holds it", 0.9, evs[:2], f, recommendations=[
                     "give each job its own --master_port / --rdzv_endpoint (localhost:0 picks a free port)",
                     "kill leftover processes from a previous run on that node"])]


def launch_agents(f: RuleInputs) -> dict[tuple[str, str | None], dict[str, tuple[str, Evidence]]]:
    """The elastic agents whose launch configuration the logs print, keyed by (file, agent pid): per agent, each
    rendezvous setting with the line that states it. Several agents may share one file (srun on two nodes into one
    output); the pid tells them apart."""
    agents: dict[tuple[str, str | None], dict[str, tuple[str, Evidence]]] = {}
    for ev in f.hits("torchrun.launch_config"):
        fx = f.fields_of(ev, "torchrun.launch_config")
        if fx.get("key"):
            agents.setdefault((ev.file, fx.get("pid")), {}).setdefault(fx["key"], (fx["value"], ev))
    return agents


# c10d's TCPStore client giving up on connecting (torch/csrc/distributed/c10d/socket.cpp: `The client socket has timed
# out after 60s while trying to connect to (host, port).`), not a store that answered and waited for members
_STORE_UNREACHED = re.compile(r"client socket has timed out after \S+ while trying to connect")


def rendezvous_timeout(f: RuleInputs):
    """A rendezvous that never filled. The agents' own launch configurations decide what was at fault (TAXONOMY:
    wrong rendezvous settings → config; a node that never came up → infrastructure): agents that name different run
    ids or endpoints each waited alone in their own rendezvous (config); agents that agree, fewer of them in the logs
    than the nodes the rendezvous waits for, mean the missing node's agent never started or never reached the
    endpoint (infrastructure, with config as the alternative when its settings are unseen)."""
    evs = f.hits("torchrun.rendezvous_timeout")
    if not evs:
        return []
    fx = f.fields_of(evs[0], "torchrun.rendezvous_timeout")
    joined = f" ({fx['joined']}/{fx['expected']} joined)" if fx.get("joined") is not None else ""
    recs = ["check MASTER_ADDR/port reachability from every node and that every node started"]
    agents = launch_agents(f)
    for key in ("run_id", "rdzv_endpoint"):
        vals = {a[key][0]: a[key][1] for a in agents.values() if key in a}
        if len(vals) > 1:
            shown = ", ".join(sorted(vals)[:4])
            return [candidate(
                "config.rendezvous_timeout", "config", f"rendezvous timed out at start-up{joined}: the agents were "
                f"launched with different {key} ({shown}), so each waited in its own rendezvous", 0.85,
                evs[:1] + list(vals.values())[:3], f, facts={"setting": key, "values": sorted(vals)},
                recommendations=["launch every node's torchrun with the same --rdzv-id and --rdzv-endpoint (derive "
                                 "them from the scheduler's job id and first host, e.g. $SLURM_JOB_ID)"] + recs)]
    if all(_STORE_UNREACHED.search(e.text) for e in evs):
        # the agent never reached the rendezvous store (c10d's client connect timed out: TCPStore's socket.cpp), as
        # against a store it reached that waited for members: no node's absence is shown, the endpoint was not served
        # from here. TAXONOMY's start-up case: an address or port that is wrong (or the endpoint's host did not take
        # it for its own and started no store: c10d rendezvous serves the store from the agent whose host name or
        # address matches --rdzv-endpoint) is config; a node that never came up stays named in the summary
        return [candidate("config.rendezvous_timeout", "config",
                          f"the rendezvous store at the endpoint could not be reached at start-up{joined}: nothing "
                          f"served it there (a wrong --rdzv-endpoint address or port, or its host did not recognise "
                          f"the address as its own and started no store), or that node was not up", 0.6, evs[:2], f,
                          recommendations=["give --rdzv-endpoint as the host name (or address) the endpoint node "
                                           "reports for itself, with a free port, and check it is reachable from every "
                                           "node (`nc -zv host port`)"] + recs)]
    mins = [int(a["min_nodes"][0]) for a in agents.values() if a.get("min_nodes", ("",))[0].isdigit()]
    want = max(mins) if mins else None
    allocated = {n for e in f.hits("env.slurm_nodes") if (n := f.fields_of(e, "env.slurm_nodes").get("nodes"))}
    if want and allocated and max(allocated) < want <= 10_000:
        # the job was given fewer nodes than the launch waits for: no node failed to come up, the launch asked for
        # more than there are (TAXONOMY: a wrong setting is config)
        alloc_ev = next(e for e in f.hits("env.slurm_nodes"))
        ev_min = next(a["min_nodes"][1] for a in agents.values() if "min_nodes" in a)
        return [candidate("config.rendezvous_timeout", "config",
                          f"rendezvous timed out at start-up{joined}: torchrun waits for {want} nodes and Slurm "
                          f"allocated {max(allocated)}: the launch's node count (--nnodes) does not fit the job's "
                          f"allocation", 0.85, evs[:1] + [ev_min, alloc_ev], f, ranks=[], nodes=[],
                          facts={"min_nodes": want, "allocated_nodes": max(allocated)},
                          recommendations=["launch torchrun with --nnodes=$SLURM_JOB_NUM_NODES (or request as many "
                                           "nodes as --nnodes asks for: sbatch -N)"])]
    if want and 0 < len(agents) < want <= 10_000 and (fx.get("joined") is None or fx["joined"] < fx.get("expected", want)):
        ev_min = next(a["min_nodes"][1] for a in agents.values() if "min_nodes" in a)
        return [c for c in (
            candidate("infrastructure.node_never_joined", "infrastructure",
                      f"rendezvous timed out at start-up{joined}: it waits for {want} nodes and only "
                      + (f"{len(agents)} agents, with the same settings, appear" if len(agents) > 1 else "1 agent appears")
                      + " in the logs: the missing node's agent never started or never reached the endpoint (a node "
                      "that never came up)",
                      0.6, evs[:1] + [ev_min], f, status="crashed", facts={"min_nodes": want, "agents": len(agents)},
                      recommendations=["check that every allocated node started its torchrun (scheduler logs, "
                                       "`sinfo`/`scontrol show job`, the node's own output)",
                                       "if that node's agent did run, compare its --rdzv-id/--rdzv-endpoint with "
                                       "these"]),
            candidate("config.rendezvous_timeout", "config", f"rendezvous timed out at start-up{joined}: the missing "
                      f"node may have been launched with other rendezvous settings (its log is not in the bundle)",
                      0.45, evs[:1], f, recommendations=recs)) if c]
    # the line is the waiting side's (the store's host, or an agent that joined): the members that did not join are
    # the ones at fault, and the line does not name them
    return [candidate("config.rendezvous_timeout", "config", f"rendezvous timed out at start-up{joined}", 0.65, evs[:2], f,
                      ranks=[], recommendations=recs)]


def nccl_version_mismatch(f: RuleInputs):
    """Ranks of one job built on different NCCL releases (TAXONOMY: mismatched versions chosen at install time →
    config). NCCL's own bootstrap check says so when it runs (`Mismatched NCCL version detected`); when it does not
    (the ranks never got far enough to compare, or a release without the check), the version banners that each node
    prints at init say it: NCCL's wire protocol is only promised between identical releases, so two nodes naming
    two versions explain a hang or a failure at set-up better than the fabric does. Banners are grouped by the node
    that printed them (by file where no node is known); a node or file holding two banners itself (a rerun after an
    upgrade, the same console) says nothing about the nodes of one run: only those with one banner each are
    compared."""
    evs = f.hits("nccl.version_mismatch")
    if evs:
        return [candidate("config.nccl_version", "config", "ranks run different NCCL versions", 0.85, evs[:2], f,
                          recommendations=["use one container image / NCCL version on every node"])]
    per_log: dict[str, dict[str, Evidence]] = {}
    hosts: set[str] = set()
    for ev in f.hits("nccl.version"):
        v = f.fields_of(ev, "nccl.version").get("nccl_version")
        if v and f.kinds.get(ev.file) != NCCL_TESTS:  # an nccl-tests run's build is a diagnostic's, not the job's
            per_log.setdefault(ev.node or ev.file, {}).setdefault(v, ev)
            hosts.update([ev.node] if ev.node else [])
    single = {who: next(iter(vs.items())) for who, vs in per_log.items() if len(vs) == 1}
    by_version: dict[str, list[tuple[str, Evidence]]] = {}
    for who, (v, ev) in single.items():
        by_version.setdefault(v, []).append((who, ev))
    if len(by_version) < 2:
        return []
    shown = "; ".join(f"{v} on {', '.join(sorted(w for w, _ in ws)[:3])}" + (f" (+{len(ws) - 3} more)" if len(ws) > 3 else "")
                      for v, ws in sorted(by_version.items()))
    cited = [ws[0][1] for _v, ws in sorted(by_version.items())][:4]
    # the odd one out: a release that a strict minority of the logs load while one other release is on the rest
    # (two logs, two releases: nothing says which is the odd one)
    sizes = sorted(len(ws) for ws in by_version.values())
    odd = [w for ws in by_version.values() if len(ws) < sizes[-1] for w, _ in ws] \
        if len(by_version) == 2 and sizes[0] < sizes[-1] else []
    nodes = [w for w in odd if w in hosts]
    return [candidate("config.nccl_version", "config", f"the nodes of this job load different NCCL releases ({shown}): "
                      "NCCL only promises to talk to its own release, so set-up and collectives between them can hang "
                      "or fail", 0.7, cited, f, ranks=[], nodes=nodes, facts={"nccl_versions": sorted(by_version)},
                      status="hung" if stops_in_nccl_setup(f) else "crashed",
                      recommendations=["use one container image / NCCL build on every node (check LD_LIBRARY_PATH, "
                                       "a system libnccl shadowing the pip one, and NCCL_NET_PLUGIN)",
                                       "print `python -c 'import torch; print(torch.cuda.nccl.version())'` on each "
                                       "node to confirm"])]


# -- printed settings ---------------------------------------------------------------------------------------------

ENV_PIDS = ("env.nccl_set_by_env", "env.assignment", "env.deprecated_torch", "env.nccl_env_unused")
_ASSIGN = re.compile(r"(?:^|[\s'\":\]])(?P<name>(?:NCCL|TORCH_NCCL|TORCH_DISTRIBUTED|TORCH_FR|GLOO)_[A-Z0-9_]+)="
                     r"(?P<value>[^\s'\"]*)")
# a line that sets variables for a command: `mpirun -x A=1 ...`, `docker run -e A=1`, `srun --export=A=1`, `A=1 torchrun`
_LAUNCH = re.compile(r"(?:^|\s)(?:-x|-e|--env|--export|env|export)[ =]|(?:^|\s|/)(?:mpirun|mpiexec|srun|torchrun|docker|"
                     r"python3?|deepspeed|accelerate)(?:\s|$)")


def printed_settings(f: RuleInputs) -> list[tuple[str, str | None, Evidence]]:
    """(name, value, line) for every variable the logs show set: NCCL's own `X set by environment to v`, env dumps
    and `export` lines, a launcher's `-x X=v`, PyTorch's deprecation warning. Prose that merely mentions `X=v`
    mid-sentence is not a setting and is left out."""
    out = []
    for pid in ENV_PIDS:
        for ev in f.hits(pid):
            fx = f.fields_of(ev, pid)
            if fx.get("name"):
                out.append((fx["name"], (fx.get("value") or "").strip("'\"") or None, ev))
            elif pid == "env.assignment" and _LAUNCH.search(ev.text):
                out.extend((m["name"], m["value"].strip("'\"") or None, ev) for m in _ASSIGN.finditer(ev.text))
    return out


def _distance(a: str, b: str) -> int:
    """Optimal-string-alignment edit distance (a swap of two neighbours counts one: IFANME)."""
    prev2, prev = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if prev2 is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


# names people set believing something reads them; nothing does
MYTHS = {
    "NCCL_TIMEOUT": "neither NCCL nor PyTorch reads NCCL_TIMEOUT: the collective timeout is init_process_group("
                    "timeout=...) (Megatron --distributed-timeout-minutes, DeepSpeed DEEPSPEED_TIMEOUT)",
    "TORCH_NCCL_TIMEOUT": "PyTorch reads no TORCH_NCCL_TIMEOUT: the collective timeout is init_process_group(timeout=...)",
    "TORCH_DISTRIBUTED_TIMEOUT": "PyTorch reads no TORCH_DISTRIBUTED_TIMEOUT: the collective timeout is "
                                 "init_process_group(timeout=...)",
}


def did_you_mean(name: str) -> str | None:
    """The known variable a printed name is a typo of: one edit away (two for names over 14 characters), and the
    only known name that close. None for known names, for foreign namespaces and for names with no close match."""
    if name in KNOWN or name.startswith(FOREIGN_PREFIXES) or name in MYTHS:
        return None
    limit = 2 if len(name) > 14 else 1
    close = sorted((d, k) for k in KNOWN if abs(len(k) - len(name)) <= limit and (d := _distance(name, k)) <= limit)
    if not close or (len(close) > 1 and close[0][0] == close[1][0]):
        return None
    return close[0][1]


def _nccl_error_of(f: RuleInputs, kinds: tuple[str, ...]) -> list[Evidence]:
    out = []
    for pid in ("pytorch.nccl_error_kind", "pytorch.nccl_error"):
        out += [e for e in f.hits(pid) if any(k in f.fields_of(e, pid).get("nccl_error", "") for k in kinds)]
    return out


# What a variable controls, by name, and the lines that show a failure there. A typo in one of these is a trigger
# only when the job then failed in that very area: the setting the user meant would have changed what failed.
AREAS = (
    ("socket interfaces and bootstrap", ("NCCL_SOCKET_", "NCCL_COMM_ID", "NCCL_OOB_", "GLOO_SOCKET_", "NCCL_HOSTID"),
     ("nccl.no_socket_interface", "env.nccl_iface_missing", "env.gloo_iface_missing", "nccl.socket_error",
      "gloo.read_error", "gloo.peer_closed"), ("SystemError", "system error")),
    ("the InfiniBand / network transport", ("NCCL_IB_", "NCCL_NET", "NCCL_CROSS_NIC", "NCCL_GDR", "NCCL_COLLNET"),
     ("nccl.ib_completion_error", "nccl.ib_async_event", "nccl.socket_error"), ("SystemError", "system error")),
    ("shared memory / peer-to-peer transports", ("NCCL_SHM_", "NCCL_P2P_", "NCCL_CUMEM", "NCCL_NVLS", "NCCL_MNNVL"),
     ("nccl.shm_no_space", "nccl.cuda_failure", "loader.shm_insufficient"), ()),
    ("the watchdog heartbeat", ("TORCH_NCCL_HEARTBEAT", "TORCH_NCCL_ENABLE_MONITORING"), ("pytorch.heartbeat_stuck",), ()),
)


def _area(name: str):
    return next((a for a in AREAS if name.startswith(a[1])), None)


def _failed_in(f: RuleInputs, area, after: Evidence) -> list[Evidence]:
    evs = f.hits(*area[2]) + _nccl_error_of(f, area[3])
    t0 = time_key(after)
    return [e for e in sorted(evs, key=lambda e: (time_key(e) is None, time_key(e) or ()))
            if t0 is None or (k := time_key(e)) is None or k >= t0]


def _any_failure(f: RuleInputs) -> bool:
    return any(s.role in ("root_candidate", "cascade") and s.count for s in f.summaries.values())


def unknown_variable(f: RuleInputs):
    """A printed NCCL_*/TORCH_NCCL_*/TORCH_DISTRIBUTED_* variable that neither NCCL nor PyTorch reads
    (tools/sources/env_names.py). A typo of a real one (one or two edits) is a `config` trigger when the job then
    failed in what the real one controls (NCCL_SOCKET_IFNAM set, then no usable socket interface); anything else —
    a typo in an unrelated area, a plausible unknown name, a name NCCL says it ignores — is weak context that never
    outranks a real fault, and nothing at all on a run that did not fail."""
    out, seen = [], set()
    if not _any_failure(f):
        return []
    for name, value, ev in printed_settings(f):
        if name in seen or name in KNOWN or not name.startswith(CHECKED_PREFIXES) or name.startswith(FOREIGN_PREFIXES):
            continue
        seen.add(name)
        meant = did_you_mean(name)
        setting = f"{name}={value}" if value is not None else name
        if meant:
            area = _area(meant)
            failed = _failed_in(f, area, ev) if area else []
            if failed:
                out.append(candidate(
                    "config.unknown_variable", "config",
                    f"{setting} is not a variable NCCL or PyTorch reads (did you mean {meant}?), and the job then failed "
                    f"in what {meant} controls ({area[0]}): the intended setting never took effect", 0.8,
                    [failed[0], ev], f, facts={"variable": name, "did_you_mean": meant, "area": area[0]},
                    recommendations=[f"rename {name} to {meant} in the launch environment and rerun",
                                     "print the environment every rank really gets (`env | grep -E 'NCCL|TORCH'`) "
                                     "at the start of the job"]))
            else:
                out.append(candidate(
                    "config.unknown_variable", "config", f"{setting} is not a variable NCCL or PyTorch reads (did you "
                    f"mean {meant}?); nothing in the logs ties it to the failure", 0.25, [ev], f,
                    facts={"variable": name, "did_you_mean": meant, "fallback": True},
                    recommendations=[f"rename {name} to {meant}: as printed, the setting has no effect"]))
        else:
            why = MYTHS.get(name) or f"{name} is read by neither NCCL nor PyTorch (it may belong to a plugin or a " \
                                    f"vendor build)"
            out.append(candidate("config.unknown_variable", "config", f"{setting} has no effect: {why}", 0.15, [ev], f,
                                 facts={"variable": name, "fallback": True},
                                 recommendations=[f"check where {name} is meant to be read; remove it if nothing does"]))
    for ev in f.hits("env.nccl_env_unused"):
        fx = f.fields_of(ev, "env.nccl_env_unused")
        if fx.get("state") == "unused" and fx.get("name") not in seen:
            seen.add(fx["name"])
            out.append(candidate("config.unknown_variable", "config", f"NCCL says {fx['name']} is unused: setting it has "
                                 "no effect in this NCCL version", 0.15, [ev], f,
                                 facts={"variable": fx["name"], "fallback": True}))
    return [c for c in out if c]


IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_OOB_NET_IFNAME")


def iface_matches(spec: str, iface: str) -> bool:
    """NCCL's NCCL_SOCKET_IFNAME semantics (src/misc/socket.cc matchIfList): a comma list of prefixes, `=` for exact
    names, a leading `^` to exclude; `name:port` items compare on the name."""
    spec = spec.strip().strip("'\"")
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    items = [x.split(":")[0] for x in spec.split(",") if x]
    hit = any(iface == x if exact else iface.startswith(x) for x in items)
    return hit != exclude


_USING = re.compile(r"(?:^|\s)(?:\[\d+\])?([A-Za-z][\w.@-]*):")  # ` [0]eth0:10.0.0.1<0> [1]ib0:...`


# interfaces that exist on every host but reach no other host: the loopback, Docker's and libvirt's default bridges
HOST_LOCAL_IFACES = ("lo", "docker0", "virbr0")
# the address Debian's and Ubuntu's /etc/hosts give the host's own name: a peer advertising it advertised its
# host name's loopback entry (127.0.0.1 itself is a single node's legitimate peer, and is not read)
HOSTNAME_LOOPBACK = "127.0.1.1"


def host_local_interface(f: RuleInputs, ifnames: dict) -> tuple[str, float, list, dict] | None:
    """(summary, strength, evidence, facts) when the rendezvous failed to reach a peer because the address it was
    given is of the peer's host only: a printed *_SOCKET_IFNAME that names a host-local interface (docker0, lo), or
    gloo trying a loopback peer address (a host name that /etc/hosts maps to 127.0.1.1, as Debian and Ubuntu write
    it). A launch setting, not the network (nccl_interface says it)."""
    failed = f.hits("gloo.connect_failed") + f.hits(*AREAS[0][2])
    if not failed:
        return None
    # NCCL's own pick, printed (`Bootstrap : Using docker0:172.17.0.1<0>`), when the address a connect failed to is
    # that interface's: every host's Docker bridge has that address, so a peer's advertised address reaches nobody.
    # On a job not shown to span nodes, a refusal there is a peer process that already exited, not the address
    several = _several_nodes(f)
    for ev in f.hits("env.nccl_iface_using"):
        fl = f.fields_of(ev, "env.nccl_iface_using")
        iface, addr = fl.get("iface"), fl.get("addr")
        if iface in HOST_LOCAL_IFACES and addr and not str(addr).startswith("127.") and \
                (hit := next((e for e in failed if (f"{addr}<" in e.text or f"[{addr}]" in e.text)
                              and (several or "Connection refused" not in e.text)), None)):
            return (f"NCCL bootstrapped on {iface} ({addr}), a host-local interface: the address it advertised from it "
                    f"cannot be reached from the other nodes (NCCL_SOCKET_IFNAME unset or wrong)", 0.8, [hit, ev],
                    {"interface": f"{iface}:{addr}"})
    if not _several_nodes(f):
        return None  # on one node a host-local interface is a fine choice, and a peer that does not answer died
    for name, (value, ev) in ifnames.items():
        first = value.lstrip("^=").split(",")[0]
        if first in HOST_LOCAL_IFACES and not value.startswith("^"):
            return (f"{name}={value} (as printed) is a host-local interface: the address advertised from it cannot be "
                    f"reached from the other nodes", 0.8, [failed[0], ev], {"setting": f"{name}={value}"})
    loop = [e for e in f.hits("gloo.connect_failed")
            if f.fields_of(e, "gloo.connect_failed").get("peer") == HOSTNAME_LOOPBACK]
    if loop:
        peer = f.fields_of(loop[0], "gloo.connect_failed")["peer"]
        return (f"gloo tried to reach a peer at {peer}, the loopback address /etc/hosts gives a host's own name: that "
                "host advertised an address only it can reach", 0.7, loop[:1], {})
    return None


# a node index above 0 or a node count above 1, as torchrun, Slurm and Open MPI print them
_SEVERAL_NODES = re.compile(r"\b(?:NODE_RANK|GROUP_RANK|SLURM_NODEID|OMPI_COMM_WORLD_NODE_RANK)=0*[1-9]|"
                            r"\b(?:(?:PET_)?NNODES|SLURM_NNODES|SLURM_JOB_NUM_NODES)=0*(?:[2-9]|[1-9]\d)|"
                            r"--nnodes[= ](?:[2-9]|[1-9]\d)")


def _several_nodes(f: RuleInputs) -> bool:
    """Whether the job spans more than one node, as the logs state it: a node index above 0 or a node count above 1
    on a kept settings line (torchrun's, Slurm's), or ranks the bundle places on two nodes."""
    if any(_SEVERAL_NODES.search(e.text) for e in f.hits(*ENV_PIDS, "job.world_size")):
        return True
    return len({rn.node for rn in f.scan.rank_nodes.values() if getattr(rn, "node", None)}) > 1


def nccl_interface(f: RuleInputs):
    """NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (or the default pick) named no interface that exists: a launch setting,
    not the fabric. With the printed value, the summary names it. A printed NCCL_SOCKET_IFNAME that NCCL's own
    `Using` lines in the same file contradict (it used an interface the setting excludes) did not reach the processes:
    a trigger when a socket/bootstrap failure followed, weak context otherwise. Only the same file: a bundle often
    holds several runs (a failing job and a later workaround test) or nodes with their own environments."""
    ifnames = {name: (value, ev) for name, value, ev in printed_settings(f) if name in IFNAME_VARS and value}
    missing = f.hits("nccl.no_socket_interface", "env.nccl_iface_missing", "env.gloo_iface_missing")
    recs = ["set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to an interface that exists and routes between the nodes "
            "(`ip -br addr` on every node)"]
    if missing:
        gloo = [e for e in missing if "Unable to find address for" in e.text]
        var = "GLOO_SOCKET_IFNAME" if gloo and missing[0] is gloo[0] else "NCCL_SOCKET_IFNAME"
        if var == "NCCL_SOCKET_IFNAME" and var not in ifnames and "NCCL_OOB_NET_IFNAME" in ifnames \
                and "NCCL_OOB_NET_IFNAME" in missing[0].text:
            var = "NCCL_OOB_NET_IFNAME"
        printed = ifnames.get(var)
        if printed:
            summary = (f"{var}={printed[0]} (as printed) names no interface that {'gloo' if var.startswith('GLOO') else 'NCCL'}"
                       f" found on this host")
            evs = [missing[0], printed[1]] + [e for e in missing[1:2]]
        elif var == "GLOO_SOCKET_IFNAME":
            iface = f.fields_of(missing[0], "env.gloo_iface_missing").get("iface", "?")
            summary = f"gloo found no address for interface {iface}: GLOO_SOCKET_IFNAME names none that exists on this host"
            evs = missing[:2]
        else:
            summary = "NCCL found no usable socket interface: NCCL_SOCKET_IFNAME names none that exists on this host"
            evs = missing[:2]
        return [candidate("config.nccl_interface", "config", summary, 0.85, evs, f,
                          facts={"setting": f"{var}={printed[0]}"} if printed else {}, recommendations=recs)]
    local = host_local_interface(f, ifnames)
    if local:
        summary, strength, evs, facts = local
        return [candidate("config.nccl_interface", "config", summary, strength, evs, f, facts=facts,
                          recommendations=["set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface that routes "
                                           "between the nodes (`ip -br addr` on every node), and make each host name "
                                           "resolve to that interface's address, not 127.0.1.1"])]
    spec = ifnames.get("NCCL_SOCKET_IFNAME")
    if not spec:
        return []
    for ev in f.hits("env.nccl_iface_using"):
        if ev.file != spec[1].file:  # another file may be another run or another node's environment: no claim
            continue
        used = _USING.findall(ev.text.split("Using", 1)[-1])
        wrong = [i for i in dict.fromkeys(used) if not iface_matches(spec[0], i)]
        if not wrong:
            continue
        failed = _failed_in(f, AREAS[0], ev)
        strong = bool(failed)
        summary = (f"NCCL_SOCKET_IFNAME={spec[0]} is printed, but NCCL used {', '.join(wrong)}, which it excludes: the "
                   f"setting did not reach the NCCL processes" + (" before the socket/bootstrap failure" if strong else ""))
        return [candidate("config.nccl_interface", "config", summary, 0.75 if strong else 0.25,
                          ([failed[0]] if strong else []) + [ev, spec[1]], f,
                          facts={"setting": f"NCCL_SOCKET_IFNAME={spec[0]}", "used": wrong,
                                 **({} if strong else {"fallback": True})},
                          recommendations=["export NCCL_SOCKET_IFNAME to every rank (mpirun -x, srun --export=ALL, the "
                                           "container's env), not only in the launching shell"] + recs)]
    return []


# -- the collective timeout against a long phase ----------------------------------------------------------------

# PyTorch's defaults (ms): ProcessGroupNCCL kProcessGroupNCCLDefaultTimeout = 10 min since 2.2 (PR #110947, also
# Megatron's --distributed-timeout-minutes default); kBackendDefaultTimeout = 30 min for gloo/other backends, and for
# NCCL before 2.2 (also DeepSpeed's default_pg_timeout).
DEFAULT_TIMEOUTS = {600_000: "10 min (ProcessGroupNCCL's default since PyTorch 2.2, Megatron's default)",
                    1_800_000: "30 min (PyTorch's default before 2.2 and gloo's; DeepSpeed's default)"}
# Long phases, by the line that starts them (Megatron-LM checkpointing.py and megatron.core datasets, DeepSpeed's
# torch_checkpoint_engine.py, HF Trainer). Read only on the last line of each rank: a phase whose start is where a
# rank's log stops was still running when the job died, and its end line need not be looked for.
#     saving checkpoint at iteration    1000 to /ckpt in torch_dist format
#     [Torch] Saving /ckpt/global_step100/mp_rank_00_model_states.pt...
#     Saving model checkpoint to /out/checkpoint-500
#     	Build and save the document index to 6a1c...-GPTDataset-train-document_index.npy
#     > building indices for blendable datasets ...
PHASES = (
    (re.compile(r"Build and save the (?:document|sample|shuffle) index|> building (?:indices|shuffle index|sample index)|"
                r"> compiling dataset index builder"), "a dataset index build", 0.6),
    (re.compile(r"saving checkpoint at iteration|Saving model checkpoint|\[Torch\] Saving /|Saving checkpoint to "),
     "a checkpoint save", 0.5),
)
# a decisive fault of its own in the bundle: the phase is not the story, and this stays context
_DECISIVE_CATEGORIES = ("oom", "gpu_cuda", "storage_io", "infrastructure", "numerical", "data")


def default_timeout_phase(f: RuleInputs):
    """A collective timed out at a PyTorch default timeout while a phase that legitimately takes long (a dataset index
    build, a checkpoint save) was where some rank's log stops (TAXONOMY edge case: `config`). A default timeout alone
    is no evidence (every job has one): this needs the phase. A decisive fault elsewhere (OOM, ECC, ENOSPC...) keeps
    it weak context; storage errors make the slow save a storage problem, left to the storage rules."""
    first = next(((e, ms) for pid in ("pytorch.watchdog_timeout", "gloo.timeout") for e in f.each(pid)
                  if isinstance(ms := f.fields_of(e, pid).get("timeout_ms"), int) and ms in DEFAULT_TIMEOUTS), None)
    if first is None:
        return []
    to_ev, ms = first
    last = f.last_lines()
    for rx, what, strength in PHASES:
        running = [e for e in last if rx.search(e.text)]
        if not running:
            continue
        ph = running[-1]
        other = [s.id for s in f.summaries.values() if s.count and s.role == "root_candidate"
                 and s.category in _DECISIVE_CATEGORIES and not s.id.startswith("env.")]
        weak = bool(other)
        who = f" on rank {ph.rank}" if ph.rank is not None else ""
        return [candidate(
            "config.default_timeout", "config",
            f"the collective timeout is the default {DEFAULT_TIMEOUTS[ms]}, and {what}{who} was still running when "
            f"it fired (that rank's log stops there): the phase outlasted the default timeout", 0.3 if weak else strength,
            [to_ev, ph], f, ranks=[ph.rank] if ph.rank is not None else [], status="hung",
            facts={"timeout_ms": ms, "phase": what, **({"fallback": True} if weak else {})},
            recommendations=["raise the timeout above the phase's length: init_process_group(timeout=timedelta("
                             "minutes=...)), Megatron --distributed-timeout-minutes, DeepSpeed DEEPSPEED_TIMEOUT "
                             "(NCCL_TIMEOUT is read by nothing)",
                             f"or shorten {what} (prebuild dataset indices offline; async / faster checkpoint storage)"])]
    return []


# "The main process goes first": context managers that hold every other rank in a barrier while the main process
# (global or per node) preprocesses, then release them to read its cache. accelerate's state.py
# PartialState.main_process_first / local_main_process_first (both through _goes_first: `if not is_main:
# self.wait_for_everyone()`), transformers' TrainingArguments.main_process_first (`dist.barrier()` on the others),
# and the torch_distributed_zero_first of the YOLO family. Read from the frame's function or, when a paste is cut
# inside contextlib's __enter__, from the `with` line that entered it.
_WAIT_FOR_MAIN = re.compile(r"\b(?:local_)?main_process_first\b|\b_goes_first\b|\btorch_distributed_zero_first\b")
# the wait ended by a timeout: c10d's watchdog and store/socket timeouts, gloo's, Python's own
_WAIT_TIMED_OUT = re.compile(r"(?i)\btimed? ?out\b|\btimeout\b|waitForInput|DistStoreError|Socket Timeout")


NEAR_WAIT = 5  # lines before a cut traceback's header where the wait's own timeout line may stand


def main_process_first_wait(f: RuleInputs):
    """A rank that failed while it waited for the main process to finish its part first (a dataset map, a
    tokenisation, a download), and the wait ended in a timeout: the main process's phase outlasted the collective
    timeout (TAXONOMY edge case: a legitimately long phase under a timeout left at its default → config). The rank
    that raised is a waiter, not the culprit; the main process's own log shows how long the phase ran.

    The timeout is the traceback's own exception; only a paste cut before its exception line borrows it from a
    timeout line of the same rank just before the header (c10d's socket warning is printed as the wait fails, the
    traceback after it) or inside the cut traceback. An exception that is not a timeout (a CUDA OOM, an NCCL error)
    ended the wait otherwise: not this."""
    files = None
    for tb in f.hits("python.traceback"):
        fx = f.fields_of(tb, "python.traceback")
        fns = [fr.rsplit(":", 1)[-1] for fr in fx.get("frames", ())]
        if not any(_WAIT_FOR_MAIN.search(t) for t in fns + list(fx.get("calls", ()))):
            continue
        said = fx.get("exception_text")
        if said:
            if not _WAIT_TIMED_OUT.search(said):
                continue
            why = Evidence(file=tb.file, line=fx["exception_line"], text=said, time=tb.time, rank=tb.rank,
                           node=tb.node, kind=tb.kind)
        else:
            files = files if files is not None else {x.rel: x for x in f.scan.files}
            fs = files.get(tb.file)
            last = tb.line + 3 * len(fns) + 1  # a frame is its `File` line, its source line, at most a `^^^` line
            near = [h for h in (fs.hits if fs else ()) if h.pattern != "python.traceback"
                    and tb.line - NEAR_WAIT <= h.line <= last and (tb.rank is None or h.rank in (None, tb.rank))
                    and _WAIT_TIMED_OUT.search(h.text)]
            if not near:
                continue
            h = min(near, key=lambda h: abs(h.line - tb.line))
            why = Evidence(file=tb.file, line=h.line, text=h.text, time=h.time, rank=h.rank, node=h.node,
                           kind=fs.kind if fs else tb.kind)
        waiter = tb.rank if tb.rank is not None else why.rank
        who = f"rank {waiter}" if waiter is not None else "a rank"
        return [candidate("config.main_process_first_timeout", "config",
                          f"{who} timed out waiting for the main process to finish its part first (a `main_process_first`"
                          " block: dataset map, tokenisation, download): that phase outlasted the collective timeout",
                          0.55, [why, tb], f, ranks=[], nodes=[], status="crashed",
                          facts={"waiting_rank": waiter} if waiter is not None else {},
                          recommendations=["raise the process-group timeout above the phase's length (HF "
                                           "TrainingArguments(ddp_timeout=...), accelerate InitProcessGroupKwargs("
                                           "timeout=...), init_process_group(timeout=...))",
                                           "or run the preprocessing once offline (datasets .map with a cache / "
                                           "save_to_disk) and load its result on every rank"])]
    return []


# c10d's TCPStore setup as torch/csrc/distributed/c10d/socket.cpp logs it (at INFO/DEBUG: TORCH_CPP_LOG_LEVEL=INFO,
# TORCH_DISTRIBUTED_DEBUG=DETAIL), before a connection is made: the server listening on rank 0, a client about to
# connect or still trying; and torch 1.x's `Waiting in store based barrier to initialize process group`
# (distributed_c10d.py). `The client socket has connected to ...` is a made connection: not in this list. And the
# trainers' own words for "calling init_process_group now", printed right before it with nothing in between that
# logs: DeepSpeed's init_distributed (deepspeed/comm/comm.py v0.16.4: rank 0's `Initializing TorchBackend in
# DeepSpeed with backend nccl` just before TorchBackend() calls init_process_group; not its `cdb=None`, which every
# rank logs on entry even when torch.distributed is already up and it returns at once) and Megatron-LM's
# `> initializing torch distributed ...` (megatron/training/initialize.py, _initialize_distributed).
_STORE_SETUP = re.compile(r"\[c10d(?: - debug)?\] The server socket (?:will attempt to listen|is attempting to listen|"
                          r"has started to listen)|\[c10d(?: - debug)?\] The client socket (?:will attempt to connect|"
                          r"is attempting to connect|has timed out after .{0,40}while trying to connect)"
                          r"|Waiting in store based barrier to initialize process group"
                          r"|Initializing TorchBackend in DeepSpeed with backend"
                          r"|> initializing torch distributed \.\.\.")


def stopped_in_store_setup(f: RuleInputs):
    """Every log stops on c10d's store setup (rank 0's TCPStore listening, a client about to connect to it, the store
    barrier waiting for the world), or on a trainer's line that it is calling init_process_group now (DeepSpeed's
    init_distributed, Megatron's `initializing torch distributed`), and nothing after: the process group was never
    formed, because the ranks never reached rank 0's store (MASTER_ADDR/MASTER_PORT that other nodes cannot reach, a world size that counts ranks
    never started, a proxy or firewall in the way). c10d prints no error while a connect is retried, so this shape
    is the evidence, as for NCCL's own setup (network.stopped_in_nccl_setup); `config`, the launch's addresses and
    counts being the usual fault, weakly: the answer stays inconclusive and says what would decide it."""
    last = f.last_lines()
    if not last or not all(_STORE_SETUP.search(e.text) for e in last):
        return []
    if past_setup(f):
        return []
    return [candidate("config.stopped_in_store_setup", "config",
                      f"every log ({len(last)}) stops while the process group forms (init_process_group: c10d's "
                      "store, rank 0 listening and the others connecting) and nothing comes after: the ranks never all "
                      "reached rank 0's store, so the process group never formed", 0.4, last[:8], f, status="hung",
                      ranks=[], nodes=[],
                      recommendations=["check that MASTER_ADDR:MASTER_PORT (rank 0's store) is reachable from every "
                                       "node (nc -zv), and that WORLD_SIZE counts only ranks that were started",
                                       "look for what sits between the ranks: a firewall or security group, a service "
                                       "mesh sidecar (Istio) or a Kubernetes service not ready yet",
                                       "the other ranks' logs say whether they tried to connect (the client socket lines)"])]


INIT_TAIL_LINES = 15  # a log that stops within this many lines of its last `Initializing distributed` stopped there


def stopped_in_lightning_init(f: RuleInputs):
    """Lightning's members announce themselves (`Initializing distributed: GLOBAL_RANK: g, MEMBER: m/N`) right
    before init_process_group, and its rank 0 says `All distributed processes registered` once every member joined;
    logs that end within a few lines of the announcements without it stopped while the process group was forming
    (the same shape as stopped_in_store_setup, in the trainer's words). Fewer members announced than N: the others
    never started or never reached this point (a launch that starts fewer processes than the world it declares, a
    node that did not come up). `config` weakly, inconclusive, saying what would decide it."""
    members = f.hits("job.lightning_member")
    if not members or f.hits("job.lightning_registered") or past_setup(f):
        return []
    lines = {fs.rel: fs.lines for fs in f.scan.files}
    last: dict[str, int] = {}
    for e in members:
        last[e.file] = max(last.get(e.file, 0), e.line)
    if any(lines.get(file, 0) - line > INIT_TAIL_LINES for file, line in last.items()):
        return []
    world = max((f.fields_of(e, "job.lightning_member").get("world_size") or 0 for e in members), default=0)
    joined = sorted({g for e in members if (g := f.fields_of(e, "job.lightning_member").get("global_rank")) is not None})
    if not world or not joined:
        return []
    missing = world - len(joined)
    said = (f"{len(joined)} of the {world} members announced themselves (global ranks {ranks_str(joined)}): the other "
            f"{missing} never started or never reached the process group" if missing > 0 else
            f"all {world} members announced themselves and none was registered")
    return [candidate("config.stopped_in_lightning_init", "config",
                      f"the logs stop while Lightning forms the process group: {said}, and rank 0 never printed "
                      "`All distributed processes registered`", 0.4, members[:8], f, status="hung", ranks=[],
                      nodes=[], recommendations=[
                          "check that the launcher starts as many processes as the trainer declares: "
                          "Trainer(num_nodes=..., devices=...) must match srun --ntasks-per-node / --nodes (or "
                          "torchrun --nnodes/--nproc-per-node)",
                          "check that MASTER_ADDR:MASTER_PORT is reachable from every node (nc -zv) and that every "
                          "node's job started (squeue, each node's log)",
                          "the missing members' own logs (or NCCL_DEBUG=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL) say "
                          "whether they started and where they stopped"])]


# ibv_modify_qp refused with EINVAL while a queue pair connects: NCCL 2.28+ prints its own hint for this errno,
# "incorrect GID index is forced by NCCL_IB_GID_INDEX" (misc/ibvwrap.cc printIbModifyQpHint); older releases print
# only the failure (2.19-2.26 `Call to ibv_modify_qp failed with error Invalid argument errno 22`, misc/ibvwrap.cc)
_MODIFY_QP_EINVAL = re.compile(r"Call to ibv_modify_qp failed with (?:error Invalid argument|22 Invalid argument)")


def forced_gid_index(f: RuleInputs):
    """NCCL_IB_GID_INDEX set by the environment, and the queue pairs' ibv_modify_qp then refused with EINVAL: the
    forced index names no usable GID on the port (empty, link-local, or RoCE v1 where v2 is needed). A setting, not
    the fabric (TAXONOMY: a wrong GID index is config), whichever NCCL release printed it; NCCL's own hint says so
    from 2.28 on, and the setting printed by NCCL itself (`NCCL_IB_GID_INDEX set by environment to 5.`) is cited."""
    fails = [e for e in f.hits("nccl.warn") if _MODIFY_QP_EINVAL.search(e.text)]
    if not fails:
        return []
    forced = [(v, ev) for name, v, ev in printed_settings(f) if name == "NCCL_IB_GID_INDEX" and v not in (None, "", "-1")]
    if not forced:
        return []
    value, ev = forced[0]
    return [candidate("config.forced_gid_index", "config",
                      f"NCCL_IB_GID_INDEX={value} is forced, and ibv_modify_qp refuses the queue pairs with EINVAL: "
                      f"that GID index holds no usable GID on the port", 0.8, fails[:2] + [ev], f, ranks=[], nodes=[],
                      facts={"setting": f"NCCL_IB_GID_INDEX={value}"},
                      recommendations=["unset NCCL_IB_GID_INDEX (NCCL picks the RoCE v2 GID itself), or set the index "
                                       "that `show_gids` lists as RoCE v2 with the node's IPv4 address on every port"])]


RULES = [port_in_use, forced_gid_index, rendezvous_timeout, nccl_version_mismatch, nccl_interface, unknown_variable,
         default_timeout_phase, main_process_first_wait,
         stopped_in_store_setup, stopped_in_lightning_init]
