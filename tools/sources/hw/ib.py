"""`ibstat` and `ibv_devinfo`: one Record per HCA port with its state, physical state, rate and link layer.

ibstat (infiniband-diags, rdma-core `ibstat.c`):

    CA 'mlx5_0'
            CA type: MT4123
            Number of ports: 1
            Port 1:
                    State: Active                 (Down, Initializing, Armed, Active)
                    Physical state: LinkUp        (Polling, Disabled, LinkUp, LinkErrorRecovery, ...)
                    Rate: 200                     (Gb/s; older versions print 40, 56, 100 ...)
                    Base lid: 5
                    Link layer: InfiniBand        (Ethernet for RoCE)

ibv_devinfo (libibverbs; `-v` adds phys_state, active_width and active_speed, from which the rate follows):

    hca_id: mlx5_0
            transport:                      InfiniBand (0)
            phys_port_cnt:                  1
                    port:   1
                            state:                  PORT_ACTIVE (4)     (PORT_DOWN (1), PORT_INIT (2), ...)
                            phys_state:             LINK_UP (5)         (POLLING (2), DISABLED (3), ...)  [-v]
                            active_width:           4X (2)                                               [-v]
                            active_speed:           50.0 Gbps (64)      (older: "25.0 Gbps (32)", "EDR")  [-v]
                            link_layer:             InfiniBand

Sources: rdma-core `infiniband-diags/ibstat.c` and `libibverbs/examples/devinfo.c`, and published outputs (MLNX OFED
4.x-24.x). Both tools' states are normalised to ibstat's words (Active, Down, Polling, LinkUp) so ports read by
either compare.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.sources.hw.record import Record, Value, evidence, lines_of, to_float

_STATE = {"port_active": "Active", "port_down": "Down", "port_init": "Initializing", "port_armed": "Armed",
          "port_active_defer": "Active"}
_PHYS = {"link_up": "LinkUp", "polling": "Polling", "disabled": "Disabled", "sleep": "Sleep",
         "port_configuration_training": "PortConfigurationTraining", "link_error_recovery": "LinkErrorRecovery",
         "phy_test": "PhyTest"}
_SPEED = {"sdr": 2.5, "ddr": 5.0, "qdr": 10.0, "fdr10": 10.3125, "fdr": 14.0625, "edr": 25.78125, "hdr": 50.0,
          "ndr": 100.0, "xdr": 200.0}


def parse_ibstat(file: str, text: str) -> list[Record]:
    out: list[Record] = []
    ca, rec = None, None
    for i, raw in enumerate(lines_of(text), 1):
        s = raw.strip()
        if m := re.match(r"^CA '([^']{1,64})'", raw):
            ca, rec = m.group(1), None
        elif ca and (m := re.fullmatch(r"Port (\d{1,3}):", s)):
            rec = Record("ibstat", file, f"{ca} port {m.group(1)}")
            out.append(rec)
        elif rec is not None and (m := re.fullmatch(r"(State|Physical state|Rate|Link layer):\s*(.*)", s)):
            key, val = m.group(1).lower().replace(" ", "_"), m.group(2).strip()
            ev = evidence(file, i, raw)
            if key == "rate":
                if (r := to_float(val)) is not None:
                    rec.values["rate"] = Value(r, ev)
            else:
                rec.values[key] = Value(val[:40], ev)
    return out


def parse_devinfo(file: str, text: str) -> list[Record]:
    out: list[Record] = []
    hca, rec = None, None
    width: int | None = None
    for i, raw in enumerate(lines_of(text), 1):
        s = raw.strip()
        if m := re.match(r"^hca_id:\s*(\S{1,64})", raw):
            hca, rec = m.group(1), None
            continue
        m = re.fullmatch(r"(\w+):\s*(.*)", s) if hca else None
        if not m:
            continue
        key, val = m.group(1), m.group(2).strip()
        ev = evidence(file, i, raw)
        if key == "port":
            rec, width = Record("ibv_devinfo", file, f"{hca} port {val}"), None
            out.append(rec)
        elif rec is None:
            continue
        elif key == "state":
            word = val.split()[0].lower() if val else ""
            rec.values["state"] = Value(_STATE.get(word, val[:40]), ev)
        elif key == "phys_state":
            word = val.split()[0].lower() if val else ""
            rec.values["physical_state"] = Value(_PHYS.get(word, val[:40]), ev)
        elif key == "link_layer":
            rec.values["link_layer"] = Value(val[:40], ev)
        elif key == "active_width":
            w = re.match(r"(\d{1,2})X", val)
            width = int(w.group(1)) if w else None
        elif key == "active_speed" and width:
            sp = re.match(r"([\d.]+) Gbps", val)
            gbps = to_float(sp.group(1)) if sp else _SPEED.get(val.split()[0].lower() if val else "")
            if gbps:
                rec.values["rate"] = Value(round(gbps * width, 1), ev)
    return out


def ports(text: str) -> list[tuple[str, int]]:
    """(CA name, port number) of every port an ibstat printout lists, in order: what `debugger collect` asks
    perfquery about (agent/collect/snapshot.py), read by the same parser as the snapshot itself."""
    out = []
    for rec in parse_ibstat("ibstat", text):
        ca, _, port = rec.subject.rpartition(" port ")
        if 0 < int(port) < 256:
            out.append((ca, int(port)))
    return out
