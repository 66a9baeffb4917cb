"""Snapshots in the tools' real formats (see each parser's docstring for the source), with the values a test
needs changed: one GPU with uncorrectable ECC errors, one port down, one slow run. Whitespace is the tools' own
(nvidia-smi pads keys to column 42, ibstat indents with tabs, perfquery pads with dots)."""

from __future__ import annotations

BUSES = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0", "00000000:9A:00.0",
         "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]


def kv(indent: int, key: str, val: str) -> str:
    return f"{' ' * indent}{key:<{42 - indent}}: {val}"


def nvsmi_q(gpus: int = 8, *, dram_unc: dict[int, int] | None = None, remap_fail: int | None = None,
            throttle: int | None = None, driver: str = "535.129.03", old: bool = False) -> str:
    """`nvidia-smi -q` of an H100 node (driver 535: "Clocks Event Reasons", SRAM/DRAM ECC); `old` is the V100 /
    driver 470 shape ("Clocks Throttle Reasons", Single/Double Bit ECC sections, retired pages counted)."""
    dram_unc = dram_unc or {}
    out = ["", "==============NVSMI LOG==============", "", kv(0, "Timestamp", "Mon Nov 24 10:02:11 2026"),
           kv(0, "Driver Version", driver), kv(0, "CUDA Version", "12.2"), "", kv(0, "Attached GPUs", str(gpus))]
    for g in range(gpus):
        hw = "Active" if throttle == g else "Not Active"
        out += [f"GPU {BUSES[g]}", kv(4, "Product Name", "Tesla V100-SXM2-32GB" if old else "NVIDIA H100 80GB HBM3"),
                kv(4, "Persistence Mode", "Enabled"), "    Clocks " + ("Throttle" if old else "Event") + " Reasons",
                kv(8, "Idle", "Not Active"), kv(8, "Applications Clocks Setting", "Not Active"),
                kv(8, "SW Power Cap", "Not Active"), kv(8, "HW Slowdown", hw),
                kv(12, "HW Thermal Slowdown", hw), kv(12, "HW Power Brake Slowdown", "Not Active"),
                kv(8, "Sync Boost", "Not Active"), kv(8, "SW Thermal Slowdown", "Not Active"),
                kv(8, "Display Clock Setting", "Not Active"), "    ECC Errors"]
        n = dram_unc.get(g, 0)
        for scope in ("Volatile", "Aggregate"):
            out.append(f"        {scope}")
            if old:
                out += ["            Single Bit", kv(16, "Device Memory", "0"), kv(16, "Register File", "0"),
                        kv(16, "Texture Memory", "N/A"), kv(16, "Total", "0"), "            Double Bit",
                        kv(16, "Device Memory", str(n)), kv(16, "Register File", "0"),
                        kv(16, "Texture Memory", "N/A"), kv(16, "Total", str(n))]
            else:
                out += [kv(12, "SRAM Correctable", "0"), kv(12, "SRAM Uncorrectable", "0"),
                        kv(12, "DRAM Correctable", "0"), kv(12, "DRAM Uncorrectable", str(n))]
        out += ["    Retired Pages", kv(8, "Single Bit ECC", "0" if old else "N/A"),
                kv(8, "Double Bit ECC", str(n) if old else "N/A"),
                kv(8, "Pending Page Blacklist", "No" if not old or not n else "Yes")]
        if not old:
            out += ["    Remapped Rows", kv(8, "Correctable Error", "0"), kv(8, "Uncorrectable Error", str(min(n, 1))),
                    kv(8, "Pending", "Yes" if n else "No"),
                    kv(8, "Remapping Failure Occurred", "Yes" if remap_fail == g else "No"),
                    "        Bank Remap Availability Histogram", kv(12, "Max", "639 bank(s)"),
                    kv(12, "High", "1 bank(s)"), kv(12, "Partial", "0 bank(s)"), kv(12, "Low", "0 bank(s)"),
                    kv(12, "None", "0 bank(s)")]
        out += ["    Temperature", kv(8, "GPU Current Temp", "34 C"), kv(8, "GPU Shutdown Temp", "92 C"),
                kv(8, "GPU Slowdown Temp", "89 C"), ""]
    return "\n".join(out) + "\n"


def topo(gpus: int = 8, *, broken: tuple[int, int] | None = None, nv: str = "NV18", nics: int = 2) -> str:
    """`nvidia-smi topo -m` (driver 535: NIC columns, CPU/NUMA affinity, GPU NUMA ID; header underlined)."""
    head = "\t" + "\t".join([f"GPU{i}" for i in range(gpus)] + [f"NIC{i}" for i in range(nics)]
                            + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])
    rows = ["\x1b[4m" + head + "\x1b[0m"]
    for a in range(gpus):
        cells = [" X " if a == b else ("SYS" if broken and {a, b} == set(broken) else nv) for b in range(gpus)]
        cells += ["PXB" if a // 4 == i else "SYS" for i in range(nics)]
        rows.append(f"GPU{a}\t" + "\t".join(cells) + f"\t{0 if a < 4 else 56}-{55 if a < 4 else 111}\t{a // 4}\t\tN/A")
    for i in range(nics):
        rows.append(f"NIC{i}\t" + "\t".join("PXB" if g // 4 == i else "SYS" for g in range(gpus)) + "\t"
                    + "\t".join(" X " if i == j else "SYS" for j in range(nics)))
    rows += ["", "Legend:", "", "  X    = Self",
             "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
             "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
             "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
             "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
             "  PIX  = Connection traversing at most a single PCIe bridge",
             "  NV#  = Connection traversing a bonded set of # NVLinks", "", "NIC Legend:", ""]
    rows += [f"  NIC{i}: mlx5_{i}" for i in range(nics)]
    return "\n".join(rows) + "\n"


def ibstat(hcas: int = 2, *, down: int | None = None, rate: dict[int, int] | None = None, polling: bool = False) -> str:
    rate = rate or {}
    out = []
    for h in range(hcas):
        st, ph = ("Down", "Polling" if polling else "Disabled") if down == h else ("Active", "LinkUp")
        out += [f"CA 'mlx5_{h}'", "\tCA type: MT4129", "\tNumber of ports: 1", "\tFirmware version: 28.39.1002",
                "\tHardware version: 0", f"\tNode GUID: 0x946dae0300{h:02x}f1c2",
                f"\tSystem image GUID: 0x946dae0300{h:02x}f1c2", "\tPort 1:", f"\t\tState: {st}",
                f"\t\tPhysical state: {ph}", f"\t\tRate: {rate.get(h, 400) if down != h else 10}",
                f"\t\tBase lid: {100 + h}", "\t\tLMC: 0", "\t\tSM lid: 1", "\t\tCapability mask: 0xa751e848",
                f"\t\tPort GUID: 0x946dae0300{h:02x}f1c2", "\t\tLink layer: InfiniBand"]
    return "\n".join(out) + "\n"


def ibv_devinfo(hcas: int = 2, *, down: int | None = None, verbose: bool = True, slow: int | None = None) -> str:
    out = []
    for h in range(hcas):
        st, ph = ("PORT_DOWN (1)", "POLLING (2)") if down == h else ("PORT_ACTIVE (4)", "LINK_UP (5)")
        out += [f"hca_id:\tmlx5_{h}", "\ttransport:\t\t\tInfiniBand (0)", "\tfw_ver:\t\t\t\t28.39.1002",
                f"\tnode_guid:\t\t\t946d:ae03:00{h:02x}:f1c2", "\tvendor_id:\t\t\t0x02c9",
                "\tvendor_part_id:\t\t\t4129", "\thw_ver:\t\t\t\t0x0", "\tboard_id:\t\t\tMT_0000000838",
                "\tphys_port_cnt:\t\t\t1", "\t\tport:\t1", f"\t\t\tstate:\t\t\t{st}", "\t\t\tmax_mtu:\t\t4096 (5)",
                "\t\t\tactive_mtu:\t\t4096 (5)", "\t\t\tsm_lid:\t\t\t1", f"\t\t\tport_lid:\t\t{100 + h}",
                "\t\t\tport_lmc:\t\t0x00", "\t\t\tlink_layer:\t\tInfiniBand"]
        if verbose:
            out.insert(len(out) - 1, f"\t\t\tphys_state:\t\t{ph}")
            out += ["\t\t\tactive_width:\t\t4X (2)",
                    f"\t\t\tactive_speed:\t\t{'50.0 Gbps (64)' if slow == h else '100.0 Gbps (128)'}"]
    return "\n".join(out) + "\n"


PC_FIELDS = ["SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
             "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards", "PortXmitConstraintErrors",
             "PortRcvConstraintErrors"]


def _dots(name: str, val) -> str:
    return f"{name}:" + "." * max(1, 32 - len(name) - 1) + str(val)


def perfquery(lid: int = 100, port: int = 1, *, errors: dict[str, int] | None = None, extended: bool = False,
              new: bool = True) -> str:
    """`perfquery` (basic counters) or `perfquery -x` (rdma-core >= 17 with error counters in the extended block
    when `new`, only the data counters when not)."""
    errors = errors or {}
    if not extended:
        out = [f"# Port counters: Lid {lid} port {port} (CapMask: 0x1600)", _dots("PortSelect", port),
               _dots("CounterSelect", "0x0000")]
        out += [_dots(f, errors.get(f, 0)) for f in PC_FIELDS]
        out += [_dots("CounterSelect2", "0x00"), _dots("LocalLinkIntegrityErrors", errors.get("LocalLinkIntegrityErrors", 0)),
                _dots("ExcessiveBufferOverrunErrors", 0), _dots("VL15Dropped", 0), _dots("PortXmitData", 4294967295),
                _dots("PortRcvData", 4294967295), _dots("PortXmitPkts", 4294967295), _dots("PortRcvPkts", 4294967295),
                _dots("PortXmitWait", 0)]
        return "\n".join(out) + "\n"
    head = (f"# Port extended counters: Lid {lid} port {port} (CapMask: 0x5A00 CapMask2: 0x0000002)" if new else
            f"# Port extended counters: Lid {lid} port {port} (CapMask: 0x1A00)")
    out = [head, _dots("PortSelect", port), _dots("CounterSelect", "0x0000"), _dots("PortXmitData", 93287411202),
           _dots("PortRcvData", 93251288331), _dots("PortXmitPkts", 141938022), _dots("PortRcvPkts", 141901177),
           _dots("PortUnicastXmitPkts", 141938022), _dots("PortUnicastRcvPkts", 141901177),
           _dots("PortMulticastXmitPkts", 0), _dots("PortMulticastRcvPkts", 0)]
    if new:
        out += [_dots(f, errors.get(f, 0)) for f in PC_FIELDS]
    return "\n".join(out) + "\n"


def nccl_tests(hosts: list[str], *, busbw: float = 362.4, new: bool = True, gpus_per_host: int = 8) -> str:
    """all_reduce_perf over `hosts` (nccl-tests 2.13+: Group column, #wrong; `new=False`: no Group, `error`)."""
    ranks = [(h, d) for h in hosts for d in range(gpus_per_host)]
    out = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
           "validation: 1 graph: 0", "#", "# Using devices"]
    for r, (h, d) in enumerate(ranks):
        grp = "Group  0 " if new else ""
        out.append(f"#  Rank {r:2d} {grp}Pid {41200 + r:6d} on {h:>10} device  {d} [0x{0x18 + d:02x}] NVIDIA H100 80GB HBM3")
    out += ["#", "#                                                              out-of-place                       "
            "in-place          ",
            "#       size         count      type   redop    root     time   algbw   busbw " + ("#wrong" if new else " error")
            + "     time   algbw   busbw " + ("#wrong" if new else " error"),
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
            "(GB/s)       "]
    size, n = 8, 2
    wrong = "0" if new else "0e+00"
    while size <= 8589934592:
        bw = busbw * min(1.0, size / 268435456) * 1.1 if size < 8589934592 else busbw * 1.05
        t = max(30.0, size / (bw * 1e3 / 1.75) if bw else 1.0)
        out.append(f"{size:12d}  {n:12d}     float     sum      -1  {t:7.1f}  {bw / 1.75:6.2f}  {bw:6.2f}  {wrong:>6}  "
                   f"{t:7.1f}  {bw / 1.75:6.2f}  {bw:6.2f}  {wrong:>6}")
        size, n = size * 8, n * 8
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {busbw:g} ", "#",
            "# Collective test concluded: all_reduce_perf", "#"]
    return "\n".join(out) + "\n"


def dcgmi(*, fail_gpu: int | None = None, layout: str = "3") -> str:
    """`dcgmi diag -r 3`: DCGM 3.3 layout (`Pass - All`, `Fail - GPU: 3`) or 4.x (`GPU3: Fail` under the test)."""
    sep = "+---------------------------+------------------------------------------------+"
    row = lambda a, b: f"| {a:<25} | {b:<46} |"  # noqa: E731
    out = ["Successfully ran diagnostic for group.", sep, row("Diagnostic", "Result"),
           "+===========================+================================================+",
           "|-----  Metadata  ----------+------------------------------------------------|",
           row("DCGM Version", "3.3.5" if layout == "3" else "4.0.0"), row("Driver Version Detected", "535.161.08"),
           row("GPU Device IDs Detected", "2330,2330,2330,2330,2330,2330,2330,2330"),
           "|-----  Deployment  --------+------------------------------------------------|"]
    if layout == "3":
        out += [row(t, "Pass") for t in ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
                                         "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap",
                                         "Graphics Processes", "Inforom")]
        out += ["+-----  Integration  -------+------------------------------------------------+", row("PCIe", "Pass - All"),
                "+-----  Hardware  ----------+------------------------------------------------+"]
        if fail_gpu is None:
            out += [row("GPU Memory", "Pass - All")]
        else:
            ok = ", ".join(str(g) for g in range(8) if g != fail_gpu)
            out += [row("GPU Memory", f"Pass - GPUs: {ok}"), row("", f"Fail - GPU: {fail_gpu}"),
                    row("Warning", f"GPU {fail_gpu} DBE errors detected. Run"), row("", " a field diagnostic on the GPU.")]
        out += [row("Diagnostic", "Pass - All"),
                "+-----  Stress  ------------+------------------------------------------------+",
                row("Targeted Stress", "Pass - All"), row("Targeted Power", "Pass - All"),
                row("Memory Bandwidth", "Pass - All"), row("EUD Test", "Skip - All"), sep]
    else:
        out += [row("software", "Pass")] + [row("", f"GPU{g}: Pass") for g in range(8)]
        out += ["+-----  Hardware  ----------+------------------------------------------------+",
                row("memory", "Fail" if fail_gpu is not None else "Pass")]
        out += [row("", f"GPU{g}: {'Fail' if g == fail_gpu else 'Pass'}") for g in range(8)]
        if fail_gpu is not None:
            out += [row(f"Warning: GPU{fail_gpu}", "A DBE occurred during the memory test.")]
        out += ["+-----  Stress  ------------+------------------------------------------------+",
                row("targeted_stress", "Pass")] + [row("", f"GPU{g}: Pass") for g in range(8)] + [sep]
    return "\n".join(out) + "\n"


def node_name(i: int) -> str:
    return f"gpu-node-{i + 1:02d}"


def worker_log(node: str, first_rank: int, world: int, per_node: int = 8, *, hang: bool = True) -> str:
    """One node's torchrun log in the `--tee 3` layout of eval/generate.py cases ([defaultN]: prefix, NCCL INFO
    init lines naming host, rank and nranks), ending in the watchdog timeouts of a collective nobody finished."""
    out = []
    for lr in range(per_node):
        r, pid = first_rank + lr, 20032 + lr
        out += [f"[default{lr}]:{node}:{pid}:{pid} [{lr}] NCCL INFO NCCL version 2.21.5+cuda12.4",
                f"[default{lr}]:{node}:{pid}:{pid + 55} [{lr}] NCCL INFO ncclCommInitRank comm 0x55d0c8a{r:04x} rank {r} "
                f"nranks {world} cudaDev {lr} nvmlDev {lr} busId {lr + 1}8000 commId 0x8c3f2a1b - Init COMPLETE"]
    for lr in range(per_node):
        r = first_rank + lr
        out.append(f"[default{lr}]:[rank{r}]: iteration      100/  100000 | consumed samples:        12800 | "
                   "elapsed time per iteration (ms): 812.4 | lm loss: 6.512E+00")
    if hang:
        for lr in range(per_node):
            r = first_rank + lr
            out.append(f"[default{lr}]:[rank{r}]:[E1105 12:44:4{lr}.469909027 ProcessGroupNCCL.cpp:616] [Rank {r}] "
                       "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=55, OpType=ALLREDUCE, NumelIn=1, "
                       "NumelOut=1, Timeout(ms)=1800000) ran for 1800077 milliseconds before timing out.")
    return "\n".join(out) + "\n"


def bundle(root, nodes: int, *, logs: bool = True, bad: str | None = None, bad_node: int = 1, manifest: bool = True,
           per_node: int = 8, tools: tuple[str, ...] = ("nvsmi", "ibstat", "perfquery", "nccl")) -> list[str]:
    """A bundle at `root`: worker logs (error-4891784-<i>.out, one per node) when `logs`, and per node a folder
    `hw/<node>/` of snapshots with a collect.json naming the host when `manifest` (else the folder name carries
    it). `bad`: ecc | port_down | busbw | throttle | dcgmi | topo | counters, on node index `bad_node`."""
    names = [node_name(i) for i in range(nodes)]
    world = nodes * per_node
    for i, n in enumerate(names):
        if logs:
            (root / f"error-4891784-{i}.out").write_text(worker_log(n, i * per_node, world, per_node))
        d = root / "hw" / (f"snap-{i:03d}" if manifest else n)
        d.mkdir(parents=True)
        if manifest:
            (d / "collect.json").write_text('{"host": "%s", "collected_at": "2026-11-24T10:02:11Z", "tools": '
                                            '["nvidia-smi", "ibstat", "perfquery", "all_reduce_perf"]}' % n)
        me = i == bad_node
        if "nvsmi" in tools:
            (d / "nvidia-smi-q.txt").write_text(nvsmi_q(dram_unc={3: 2} if me and bad == "ecc" else None,
                                                        throttle=5 if me and bad == "throttle" else None))
        if "ibstat" in tools:
            (d / "ibstat.txt").write_text(ibstat(down=1 if me and bad == "port_down" else None))
        if "perfquery" in tools:
            errs = {"SymbolErrorCounter": 4021, "LinkDownedCounter": 7} if me and bad == "counters" else None
            (d / "perfquery.txt").write_text(perfquery(100 + 2 * i, errors=errs) + perfquery(101 + 2 * i))
        if "nccl" in tools:
            (d / "all_reduce_perf.log").write_text(nccl_tests([n], busbw=121.7 if me and bad == "busbw" else 362.4))
        if "dcgmi" in tools:
            (d / "dcgmi-diag.txt").write_text(dcgmi(fail_gpu=6 if me and bad == "dcgmi" else None))
        if "topo" in tools:
            (d / "topo.txt").write_text(topo(broken=(2, 5) if me and bad == "topo" else None))
    return names
