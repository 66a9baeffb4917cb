"""Configuration mistakes that stop a job at start-up: ports, rendezvous, mismatched NCCL versions."""

from __future__ import annotations

from trainlog_debugger.tools.rules.base import RuleInputs, candidate


def port_in_use(f: RuleInputs):
    evs = f.hits("torchrun.address_in_use")
    if not evs:
        return []
    addr = f.fields_of(evs[0], "torchrun.address_in_use").get("address", "the rendezvous port")
    return [candidate("config.port_in_use", "config", f"the rendezvous/store port is already in use ({addr}): another job or "
                 f"a leftover process holds it", 0.9, evs[:2], f, recommendations=[
                     "give each job its own --master_port / --rdzv_endpoint (localhost:0 picks a free port)",
                     "kill leftover processes from a previous run on that node"])]


def rendezvous_timeout(f: RuleInputs):
    evs = f.hits("torchrun.rendezvous_timeout")
    if not evs:
        return []
    fx = f.fields_of(evs[0], "torchrun.rendezvous_timeout")
    joined = f" ({fx['joined']}/{fx['expected']} joined)" if fx.get("joined") is not None else ""
    return [candidate("config.rendezvous_timeout", "config", f"rendezvous timed out at start-up{joined}", 0.65, evs[:2], f,
                 recommendations=["check MASTER_ADDR/port reachability from every node and that every node started"])]


def nccl_version_mismatch(f: RuleInputs):
    evs = f.hits("nccl.version_mismatch")
    return [candidate("config.nccl_version", "config", "ranks run different NCCL versions", 0.85, evs[:2], f,
                 recommendations=["use one container image / NCCL version on every node"])] if evs else []


def nccl_interface(f: RuleInputs):
    """NCCL_SOCKET_IFNAME (or the default pick) named no interface that exists: a launch setting, not the fabric."""
    evs = f.hits("nccl.no_socket_interface")
    return [candidate("config.nccl_interface", "config", "NCCL found no usable socket interface: NCCL_SOCKET_IFNAME "
                      "names none that exists on this host", 0.85, evs[:2], f,
                      recommendations=["set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to an interface that exists and "
                                       "routes between the nodes (`ip -br addr` on every node)"])] if evs else []


RULES = [port_in_use, rendezvous_timeout, nccl_version_mismatch, nccl_interface]
