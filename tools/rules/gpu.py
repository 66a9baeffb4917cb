"""GPU and CUDA faults: driver Xid, ECC, CUDA runtime errors, device asserts, CUDA failures inside NCCL.

The Xid number decides between hardware (drain the node) and the application's own fault: 48/63/64/74/79/9x/119
point at the GPU or its links; 13/31/43/45 are usually the program's own bad access or a consequence of a kill.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.lines.attribution import named_in_text
from trainlog_debugger.tools.rules.base import RuleInputs, by_time, candidate, restart_without
from trainlog_debugger.tools.sources.kernel import XID_MEANING
from trainlog_debugger.tools.sources.nccl.format import HOST_PID

HW_XIDS = {48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 154}
RECORDED_STRENGTH = 0.45  # a hardware Xid that xid.yaml calls context: named, never decisive on its own


def _recorded_only(f: RuleInputs) -> set[int]:
    """The Xids NVIDIA's catalog (our xid.yaml) gives the role `context`: events the driver recorded and handled (a
    row remap that takes effect at the next reset, a high rate of corrected single-bit errors), not faults that end
    a process. Why: a run that finished with Xid 63 in its node's journal was read as a GPU crash, at high
    confidence."""
    if f.messages is None:
        return set()
    return {int(m.number) for m in f.messages.tables().get("xid", ()) if m.role == "context" and str(m.number).isdigit()}


_BUS_ID = re.compile(r"\bbusId ([0-9a-fA-F]{1,16})\b")


def xid_rank(f: RuleInputs, ev) -> int | None:
    """The rank that ran on the GPU an Xid names, from NCCL's own init lines (`host:pid:tid [dev] NCCL INFO ... rank
    R nranks N cudaDev D ... busId 9a000 ... Init COMPLETE`): by the PCI address (NCCL's busId is the address's hex
    digits, `0000:9a:00.0` → 9a000) on the Xid's node, or by the Xid's `pid=` on that node. Bus ids repeat on every
    node of a cluster and pids across nodes, so the node must match unless the init lines name one host only; one
    rank or none, never a guess."""
    fx = f.fields_of(ev, "kernel.xid")
    pci, pid = fx.get("pci"), fx.get("pid")
    if not pci and pid is None:
        return None
    bus = int(pci.replace(":", "") + "0", 16) if pci else None
    node = ev.node or next(iter(f.nodes_of([ev])), None)
    inits = [(e, f.fields_of(e, "nccl.comm_init")) for e in f.hits("nccl.comm_init")]
    world = max((fl.get("nranks", 0) for _, fl in inits), default=0)
    seen: list[tuple[str, int | None, str, int]] = []  # (host, bus, pid, rank)
    for e, fl in inits:
        m = HOST_PID.search(e.text)
        if m is None or fl.get("nranks") != world or not isinstance(fl.get("comm_rank"), int):
            continue
        b = _BUS_ID.search(e.text)
        seen.append((m.group("host"), int(b.group(1), 16) if b else None, m.group("pid"), fl["comm_rank"]))
    hosts = {h for h, *_ in seen}
    if node is None:  # the syslog header's host (`Nov  5 07:25:48 gpu-node-32 kernel:`), or a known host in the file's name
        node = named_in_text(ev.text)[1] or next((h for h in sorted(hosts, key=len, reverse=True)
                                                  if re.search(rf"(?<![A-Za-z0-9]){re.escape(h)}(?![A-Za-z0-9])", ev.file)), None)
    if node is not None:
        seen = [x for x in seen if x[0] == node or x[0].split(".")[0] == node.split(".")[0]]
    elif len(hosts) > 1:
        return None
    ranks = {r for _h, b, p, r in seen if (bus is not None and b == bus) or (pid is not None and p == str(pid))}
    return next(iter(ranks)) if len(ranks) == 1 else None


def xid(f: RuleInputs):
    out: list = []
    hits = f.hits("kernel.xid")
    if not hits:
        return out
    recorded = _recorded_only(f)
    n_of = {id(e): f.fields_of(e, "kernel.xid").get("xid") for e in hits}
    faults = [e for e in hits if n_of[id(e)] in HW_XIDS and n_of[id(e)] not in recorded]
    for ev in hits[:1] + [e for e in faults if e is not hits[0]][:1]:
        n = n_of[id(ev)]
        hw = n in HW_XIDS
        weak = n in recorded
        node = ev.node or next(iter(f.nodes_of([ev])), None)
        where = node or "the node that logged it"
        rank = xid_rank(f, ev)
        on = f" (rank {rank}'s GPU, by NCCL's init lines)" if rank is not None else ""
        out.append(candidate("gpu.xid", "gpu_cuda", f"Xid {n} ({XID_MEANING.get(n, 'driver-reported GPU error') if n is not None else 'driver-reported GPU error'}) on {where}{on}",
                        RECORDED_STRENGTH if weak else 0.9 if hw else 0.5, [ev], f, status="crashed",
                        ranks=[rank] if rank is not None else None,
                        restart=restart_without(node) if hw and not weak else "fix first",
                        recommendations=[f"Xid {n} is recorded, not a fault by itself: look for the error that ended "
                                         f"the job; watch {where} (`nvidia-smi -q -d ECC,ROW_REMAPPER`)"] if weak else
                        [f"drain {where} and reset or replace the GPU (Xid {n} is a hardware/link fault)"]
                        if hw else ["Xid %s is usually the program's own fault or a consequence: read the CUDA error "
                                    "on the same rank" % n]))
    return out


def ecc(f: RuleInputs):
    evs = f.hits("cuda.ecc")
    if not evs:
        return []
    node = f.nodes_of(evs[:1])
    where = node[0] if node else "the node that ran the failing rank"
    return [candidate("gpu.ecc", "gpu_cuda", f"uncorrectable ECC error on {where}", 0.9, evs[:3], f,
                 restart=restart_without(node[0] if node else None),
                 recommendations=[f"drain {where}; check `nvidia-smi -q -d ECC,ROW_REMAPPER` and reset or RMA the GPU",
                                  "if several jobs failed on the same node, that node is the common factor"])]


# the CUDA error that ended c10d's watchdog thread (`Process group watchdog thread terminated with exception: CUDA
# error: an illegal memory access was encountered`): the watchdog queries each work's CUDA event, so a sticky fault
# of this rank's GPU surfaces there first; the line is the watchdog's, the fault is the GPU's
_WATCHDOG_CUDA = re.compile(r"^CUDA error: (?P<cuda_error>.*?)\s*$")


def cuda_error(f: RuleInputs):
    errs: dict[tuple[str, int], str] = {}
    watchdog = []
    for e in f.hits("pytorch.watchdog_thread_exception"):
        m = _WATCHDOG_CUDA.match(f.fields_of(e, "pytorch.watchdog_thread_exception").get("what") or "")
        if m and "out of memory" not in m.group(1) and "ECC" not in m.group(1):
            errs[(e.file, e.line)] = m.group("cuda_error")
            watchdog.append(e)
    evs = [e for e in f.hits("cuda.error", "cuda.accelerator_abort") if "out of memory" not in e.text
           and "ECC" not in e.text]
    if watchdog:
        evs = sorted(evs + watchdog, key=by_time)
    if not evs:
        return []
    err = f.fields_of(evs[0], "cuda.error").get("cuda_error") or errs.get((evs[0].file, evs[0].line)) or "CUDA error"
    who = f" on rank {evs[0].rank}" if evs[0].rank is not None else ""
    return [candidate("gpu.cuda_error", "gpu_cuda", f"CUDA error{who}: {err}", 0.7, evs[:3], f,
                 recommendations=["rerun with CUDA_LAUNCH_BLOCKING=1 to get the failing kernel",
                                  "if it recurs on the same node only, suspect the GPU (check dmesg for Xid)"])]


# the kernel's own assertion, as CUDA_KERNEL_ASSERT prints it: `...: block: [0,0,0], thread: [0,0,0] Assertion `<msg>`
# failed.`; the message is the condition (`t >= 0 && t < n_classes`) or, for torch._assert_async(cond, msg), the
# program's own words
_ASSERTION = re.compile(r"Assertion `([^`\n]{1,500})` failed")


def device_assert(f: RuleInputs):
    """A device-side assert: the message the kernel asserted decides what failed where its words name a fault class
    (torchtitan's `Loss or gradient norm is not finite on at least one rank` through torch._assert_async: the run's
    own finiteness check, numerical); an index or bounds condition, the usual one, is the program's (software)."""
    evs = f.hits("cuda.device_assert")
    if not evs:
        return []
    for e in [x for x in f.hits("cuda.device_assert", "generic.error_line") if "Assertion `" in x.text][:8]:
        m = _ASSERTION.search(e.text)
        if m is None or f.messages is None:
            continue
        said = f.messages.read_by_words(m.group(1), strong_only=True)
        if said and said[0] not in ("software", "config"):
            return [candidate("gpu.device_assert", said[0], f"a device-side assert whose message says what failed "
                              f"({said[1]!r}): {said[2]}", 0.75, [e] + [x for x in evs if x is not e][:2], f,
                              facts={"assertion": m.group(1)[:200], "read_by": "lexicon"},
                              recommendations=["read the asserted message: it is the check that stopped the run"])]
    return [candidate("gpu.device_assert", "software", "device-side assert in a CUDA kernel (an index or label out of range)",
                 0.75, evs[:3], f, recommendations=["check the labels/indices fed to the failing op (e.g. class ids "
                                                    "≥ num_classes); rerun on CPU or with CUDA_LAUNCH_BLOCKING=1"])]


def cuda_library(f: RuleInputs):
    evs = f.hits("cuda.library_error")
    return [candidate("gpu.library", "gpu_cuda", "cuBLAS/cuDNN call failed", 0.6, evs[:3], f,
                 recommendations=["check the CUDA/cuDNN versions; if one node only, suspect the GPU"])] if evs else []


def _quoted_noise(f: RuleInputs, ev) -> bool:
    """Whether the CUDA error NCCL quotes (`Cuda failure 'driver shutting down'`) is one the CUDA table calls noise:
    cudaErrorCudartUnloading, a call made while the process exits after the driver unloaded."""
    err = f.fields_of(ev, "nccl.cuda_failure").get("error")
    if not err or f.messages is None:
        return False
    known: dict[str, bool] = f.__dict__.setdefault("_quoted_noise", {})  # once per error text, not per rank
    if err not in known:
        m = f.messages.best(f"CUDA error: {err}")
        known[err] = m is not None and m.table == "cuda" and m.role == "noise"
    return known[err]


def nccl_cuda_failure(f: RuleInputs):
    evs = [e for e in f.hits("nccl.cuda_failure") if not _quoted_noise(f, e)]
    if not evs:
        return []
    where = f.fields_of(evs[0], "nccl.cuda_failure").get("file", "")
    if "nvls" in where:
        return [candidate("gpu.nvls", "infrastructure", "NCCL's NVLink SHARP (NVLS) setup failed with a CUDA error: NVSwitch "
                     "multicast state unusable", 0.75, evs[:3], f, restart="fix first",
                     recommendations=["after a fabric manager restart the GPUs must be reset: reset the GPUs or reboot "
                                      "the node", "workaround: NCCL_NVLS_ENABLE=0"])]
    return [candidate("gpu.nccl_cuda", "gpu_cuda", "a CUDA call failed inside NCCL", 0.6, evs[:3], f)]


_WARNING_LEVEL = re.compile(r"\bWARN(?:ING)?\b")


def rerun_verdict(f: RuleInputs):
    """Megatron's verdict on a step it re-ran (megatron/core/rerun_state_machine.py): it outranks the NaN line it
    explains (megatron.found_nan, 0.85), since the rerun is the experiment that tells a GPU from the numbers.
    `transient`: the same GPU gave another result, that GPU (the line's own node and device). `persistent`: the
    result reproduced on the first GPU but not on a second one, so the FIRST GPU is faulty; the verdict line is
    printed on the second, and the first is the one its `First rerun: ... is reproducible` line named. `Correct
    result`: it reproduced on another GPU, so the model or the data produced it (numerical)."""
    evs = f.hits("megatron.rerun_verdict")
    if not evs:
        return []
    # log_failure writes a fatal check's verdict with logger.error and a non-fatal one's with logger.warning (the run
    # goes on: "Continuing normal execution because failed validation was not fatal"): only the fatal ones decide
    fatal = [e for e in evs if not _WARNING_LEVEL.search(e.text.split("Rank ", 1)[0])]
    if not fatal:
        e = min(evs, key=by_time)
        return [candidate("gpu.rerun_verdict", "gpu_cuda", "Megatron's rerun of a rejected step gave a verdict at "
                          "warning level: a non-fatal check, and the run went on", 0.45, [e], f, ranks=[], nodes=[],
                          facts={"verdict": "not fatal"},
                          recommendations=["watch that GPU: a transient verdict that repeats is a hardware lead"])]
    evs = fatal
    e = min(evs, key=by_time)
    fx = f.fields_of(e, "megatron.rerun_verdict")
    verdict = fx.get("verdict")
    if verdict is None:  # `Correct result (but possible Application error)`
        return [candidate("gpu.rerun_verdict", "numerical", "Megatron re-ran the rejected step on another GPU and got "
                          "the same result: the model or the data produced it, not the hardware", 0.9, [e], f,
                          ranks=[], nodes=[], facts={"verdict": "correct"},
                          recommendations=["treat it as divergence or bad data: inspect the batch at that iteration, "
                                           "lower the learning rate or skip the data"])]
    if verdict == "transient":
        where, evs_out = (fx.get("host"), fx.get("device"), fx.get("rerun_rank")), [e]
    else:
        first = [r for r in f.hits("megatron.rerun_reproducible")
                 if f.fields_of(r, "megatron.rerun_reproducible").get("iteration") == fx.get("iteration")]
        rx = f.fields_of(first[-1], "megatron.rerun_reproducible") if first else {}
        where = (rx.get("host"), rx.get("device"), rx.get("rerun_rank"))
        evs_out = [e] + first[-1:]
    host, device, rank = where
    gpu = f"GPU {device} of {host}" if host is not None else "the GPU of the first rerun (its line is not in the bundle)"
    what = ("re-running the same step on the same GPU gave a different result: a transient fault of " + gpu
            if verdict == "transient" else
            "the step reproduced on its first GPU but not on another one: " + gpu + " computes wrong results")
    return [candidate("gpu.rerun_verdict", "gpu_cuda", what, 0.9, evs_out, f,
                      ranks=[rank] if rank is not None else [], nodes=[host] if host else [],
                      facts={"verdict": verdict, **({"device": device} if device is not None else {})},
                      restart=restart_without(host),
                      recommendations=[f"drain {host or 'that node'} and run GPU diagnostics (dcgmi diag -r 3); resume "
                                       "from the last checkpoint on other hardware"])]


# the kernel names the device an AER report is about by its driver (`mlx5_core 0000:a1:00.1: AER: PCIe Bus Error:
# severity=Uncorrected ...`, drivers/pci/pcie/aer.c pci_err; kernels before 4.20 print it without `AER: `; a VMD
# domain has five hex digits): a network adapter's driver makes it the fabric's
_NIC_DRIVER = re.compile(r"\b(?:mlx[45]_core|mlx5_ib|bnxt_en|bnxt_re|ice|i40e|ixgbe|efa|ena|hfi1|irdma|qede|cxgb4|"
                         r"cxi_core|cxi_ss1)\s+[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: (?:AER: )?"
                         r"(?:PCIe Bus Error|Uncorrected|Multiple Uncorrected)")


def pcie_aer(f: RuleInputs):
    """An uncorrected PCIe error (AER) on the node: the device's link failed. Whose: the kernel's lines about the
    device name its driver; a network adapter's (mlx5_core, bnxt, EFA, ...) makes it the fabric's (the ranks' NCCL
    errors on that NIC follow), anything else (the GPU, its PCIe switch, a device no line names) stays the GPU's
    reading it always was, weakly: find the device at that address (`lspci -s`)."""
    evs = f.hits("kernel.aer_uncorrected")
    if not evs:
        return []
    nic = [e for e in evs if _NIC_DRIVER.search(e.text)]
    if nic:
        return [candidate("gpu.pcie_aer", "network", "uncorrected PCIe error (AER) on a network adapter (its driver "
                          "reports it): the node's NIC or its link failed", 0.7, (nic + evs)[:3], f,
                          recommendations=["drain the node and check the adapter at that PCI address (`lspci -s`, "
                                           "`mlxlink`/`ibstat`, reseat or replace the card)"])]
    return [candidate("gpu.pcie_aer", "gpu_cuda", "uncorrected PCIe error (AER) on a device's link", 0.6, evs[:3], f,
                      recommendations=["find the device at that PCI address (`lspci -s`); a GPU or its switch port "
                                       "with uncorrected AER errors needs the node drained and the link or card "
                                       "checked"])]


RULES = [xid, ecc, cuda_error, device_assert, cuda_library, nccl_cuda_failure, rerun_verdict, pcie_aer]
