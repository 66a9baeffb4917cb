"""sniff(): one row per (name, head) → kind, heads written in the FORMATS.md shapes, plus near-misses
that must NOT be classified by a name or a single stray token."""
import json
import pickle

import pytest

from trainlog_debugger.tools.sources.detect import ALL_KINDS, WORKER_KINDS, sniff

RANK_TB = "[rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout\n"
SLURM_CANCEL = "slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT 2024-11-05T12:34:56 DUE TO TIME LIMIT ***\n"
SRUN = "srun: error: frontier07210: tasks 8-12,14-15: Aborted (core dumped)\n"
ELASTIC = ("W0813 22:08:39.776000 2585 torch/distributed/elastic/multiprocessing/api.py:898] "
           "Sending process 2711 closing signal SIGTERM\n")
CHILD_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n" + "=" * 60 + "\ntrain.py FAILED\n"
NEMO = "[NeMo I 2025-04-11 14:46:18 nemo_logging:393] Global Checkpoint Load : Rank : 0 : Start time : 1.0\n"
NEMO2 = "Training epoch 0, iteration 10/99 | lr: 1e-05 | global_batch_size: 8 | reduced_train_loss: 9.47\n"
MEGATRON = (" [2024-11-05 12:00:00] iteration      100/   10000 | consumed samples:        25600 | "
            "elapsed time per iteration (ms): 1234.5 | learning rate: 1.499999E-04 |\n")
DS = ("[2023-05-01 12:00:00,123] [INFO] [real_accelerator.py:110:get_accelerator] Setting ds_accelerator to cuda\n"
      "[2023-05-01 12:00:01,000] [INFO] [comm.py:594:init_distributed] cdb=None\n"
      "DeepSpeed info: version=0.9.2\n")
DS_LAUNCH = "worker-0: [2023-05-01 12:00:00,123] [INFO] [launch.py:145:main] WORLD INFO DICT: {'worker-0': [0, 1]}\n"
AIS_T = ("Started up at 2025/08/21 19:17:52, host ais-target-3, go1.24.5 for linux/amd64\n"
         "Node t[XfTkbKqW], Version 1.5.0.6b7de24, build 2025-08-20T10:00:00+0000, CPUs(64, runtime=64)\n"
         "I 19:17:52.204518 common:494 21 Aug 25 19:00 UTC =============\n")
AIS_P = AIS_T.replace("ais-target-3", "ais-proxy-0").replace("Node t[", "Node p[")
AIS_ROTATED = "Rotated at 2025/08/21 20:00:00, host ais-target-3, go1.24.5 for linux/amd64\nI 20:00:01.000001 hello\n"
AIS_BODY = "I 19:18:02.100016 {err.get.n:12,get.n:4811734,kalive.ns:712345}\nW 19:17:52.204518 moss:589 pending: 130\n"
CLOUD = json.dumps([{"insertId": "1xyz", "logName": "projects/p/logs/workerpool0-0",
                     "resource": {"type": "ml_job", "labels": {"job_id": "1", "task_name": "workerpool0-0"}},
                     "severity": "ERROR", "timestamp": "2024-11-05T12:00:01.123456789Z",
                     "textPayload": RANK_TB.strip()}], indent=2)
CLOUD_JSONL = json.dumps({"jsonPayload": {"message": "hi", "levelname": "INFO"},
                          "resource": {"type": "ml_job"}, "timestamp": "2024-11-05T12:00:01Z"}) + "\n"
DMESG = "[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n[ 5107.650000] NVRM: GPU 0000:03:00.0: GPU has fallen off the bus.\n"
SYSLOG = ("Jan 22 18:38:35 host kernel: NVRM: Xid (PCI:0000:81:00): 31, pid='<unknown>', name=<unknown>, Ch 00000016\n"
          "Jan 22 18:38:36 host systemd[1]: Started Session 5 of user root.\n")
NVSMI = ("Tue Nov  5 12:00:00 2024\n+---------------------------------------------------------------------------------------+\n"
         "| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |\n")
NVSMI_Q = "\n==============NVSMI LOG==============\n\nTimestamp : Tue Nov  5 12:00:00 2024\nDriver Version : 535.104.05\n"
PYSPY = ('Process 123: python train.py --cfg a.yaml\nPython v3.10.12 (/usr/bin/python3.10)\n\n'
         'Thread 2451 (active+gil): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2501)\n')
PYSPY_MAC = 'Thread 0X7F3A12345 (idle): "MainThread"\n    wait (threading.py:320)\n'
FR_JSON = json.dumps({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                      "entries": [{"record_id": 0, "profiling_name": "nccl:all_reduce"}]})
FR_PICKLE = pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [{"record_id": 1}]}, protocol=4)
NCCL = "node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'\n"

CASES = [
    # slurm
    ("error-4891784-3.out", "hello\n", "slurm"),
    ("slurm-4891784.out", RANK_TB, "slurm"),
    ("job/slurm-123_4.out", NEMO, "slurm"),                       # launcher layout beats framework
    ("combined.log", "Epoch 1\n" + SLURM_CANCEL, "slurm"),
    ("x.txt", "  3: hello\n" + SRUN, "slurm"),
    # torchrun
    ("run_ab12/attempt_0/3/stderr.log", RANK_TB, "torchrun"),
    ("logs.tgz!torchelastic_x/attempt_1/0/stdout.log", "step 1\n", "torchrun"),
    ("agent.log", ELASTIC, "torchrun"),
    ("torchelastic_summary.log", CHILD_FAILED, "torchrun"),
    ("console.txt", "[default0]:step 1 loss 2.3\n[default1]:step 1 loss 2.4\n", "torchrun"),
    # rank_log
    ("rank_3.log", "loss 1.0\n", "rank_log"),
    ("rank_10.log.gz", "", "rank_log"),
    ("out.txt", RANK_TB * 3 + "plain line\n", "rank_log"),
    ("x.log", "  3: " + RANK_TB, "rank_log"),
    # nemo
    ("nemo_log_globalrank-3_localrank-3.txt", "anything\n", "nemo"),
    ("rank_3.log", NEMO, "nemo"),                                 # content beats a weak name
    ("train.out", "\x1b[32m" + NEMO, "nemo"),
    ("stdout", NEMO2, "nemo"),
    # megatron
    ("rank_7.log", MEGATRON, "megatron"),
    ("log.txt", "building GPT model ...\n" + MEGATRON, "megatron"),
    # deepspeed
    ("ds.log", DS, "deepspeed"),
    ("pdsh.txt", DS_LAUNCH, "deepspeed"),
    # AIStore
    ("aistarget.ais-target-3.INFO.0821-191752.4171", AIS_T, "ais_target"),
    ("x.log", AIS_P, "ais_proxy"),
    ("aisproxy.ais-proxy-0.ERROR.0821-191752.11", AIS_BODY, "ais_proxy"),
    ("aislogs/aistarget-Xf3k.tar.gz!aistarget.t3.INFO.0821-191752.4171.gz", AIS_BODY, "ais_target"),
    ("x.log", AIS_ROTATED, "ais_target"),                         # no title line: 'target' by default
    ("aisproxy.INFO", AIS_ROTATED, "ais_proxy"),                  # ... or the role from the name
    # cloud logging
    ("downloaded-logs-20241105.json", CLOUD, "cloud_logging"),
    ("logs.jsonl", CLOUD_JSONL * 3, "cloud_logging"),
    ("rank_0.log", CLOUD, "cloud_logging"),
    # kernel
    ("dmesg.txt", "", "kernel"),
    ("kern.log.1", "whatever\n", "kernel"),
    ("node3/messages-20241022", "x\n", "kernel"),
    ("combined.log", DMESG, "kernel"),
    ("host.txt", SYSLOG, "kernel"),
    ("rank_0.log", "[Tue Oct 22 03:18:42 2024] NVRM: Xid (PCI:0000:81:00): 48, An uncorrectable ECC error\n", "kernel"),
    # nvidia-smi
    ("nvidia-smi.txt", NVSMI, "nvidia_smi"),
    ("gpu_state.log", NVSMI_Q, "nvidia_smi"),
    ("node_info", "", "generic"),
    # py-spy
    ("dump_rank3.txt", PYSPY, "pyspy"),
    ("stack.txt", PYSPY_MAC, "pyspy"),
    ("py-spy-dump.txt", "", "pyspy"),
    ("spy.json", json.dumps([{"pid": 1, "thread_id": 2, "os_thread_id": 3, "frames": []}]), "pyspy"),
    # flight recorder
    ("nccl_trace_rank_0", FR_PICKLE.decode("latin-1").encode("latin-1"), "fr_dump"),
    ("comm_lib_trace_rank_12", b"\x80\x05\x95\x00\x00", "fr_dump"),
    ("custom_prefix_3", FR_PICKLE, "fr_dump"),                    # env-var prefix: content decides
    ("fr/trace_rank_3.json", FR_JSON, "fr_dump"),
    # generic
    ("combined.log", NCCL, "generic"),
    ("node_H100-1.log", "H100-1:9821:9920 [1] NCCL INFO proxy.cc:679 -> 6\n", "generic"),
    ("truth.yaml", "category: network\n", "generic"),
]

# hardware and fabric snapshots (tools/sources/hw), in their tools' real first lines (tests/sources/hw/hw_samples.py has whole files)
TOPO = ("\x1b[4m\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV18\tPXB\t0-55\t0\t\tN/A\nGPU1\tNV18\t X \tPXB\t0-55\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n"
        "  NV#  = Connection traversing a bonded set of # NVLinks\n")
IBSTAT = "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tRate: 400\n"
DEVINFO = "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
PERFQ = ("# Port counters: Lid 5 port 1 (CapMask: 0x1600)\nPortSelect:......................1\n"
         "SymbolErrorCounter:..............0\nLinkDownedCounter:...............0\n")
NCCLT = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
         "validation: 1 graph: 0\n#\n# Using devices\n#  Rank  0 Group  0 Pid  41200 on gpu-node-01 device  0 [0x18] "
         "NVIDIA H100 80GB HBM3\n")
DCGM = ("Successfully ran diagnostic for group.\n+---------------------------+-------------------------------------------"
        "-----+\n| Diagnostic                | Result                                         |\n")
NVSMI_Q = "\n==============NVSMI LOG==============\n\nTimestamp                                 : Mon Nov 24 2026\n"
CASES += [
    ("topo.txt", TOPO, "gpu_topo"),
    ("node7.txt", TOPO, "gpu_topo"),                              # content, whatever the name
    ("ibstat.txt", IBSTAT, "ib_status"),
    ("out.log", DEVINFO, "ib_status"),
    ("perfquery.txt", PERFQ, "ib_counters"),
    ("slurm-4891784.out", NCCLT, "nccl_tests"),                   # nccl-tests run by sbatch: content beats the name
    ("dcgmi-diag.txt", DCGM, "dcgm_diag"),
    ("nvidia-smi-q.txt", NVSMI_Q, "nvidia_smi"),
    ("all_reduce_perf_node3.log", "", "nccl_tests"),              # name hints when the head says nothing
    ("ibv_devinfo.txt", "", "ib_status"),
]

NEAR_MISSES = [
    ("nohup.out", "hello\n", "generic"),                          # .out is not SLURM by itself
    ("model.pkl", pickle.dumps({"weights": [1, 2, 3]}), "generic"),  # a pickle, but not FR (binary → skipped by bundle)
    ("notes.txt", "we ran srun: and slurmstepd: inline mid-sentence\n", "generic"),
    ("data.json", json.dumps([{"timestamp": "x", "value": 1}]), "generic"),   # JSON but no payload
    ("x.log", "see [rank3]: in the docs\nline two\nline three\n", "generic"),  # [rankN]: not dominant
    ("ranking.txt", "top 10\n", "generic"),
    ("x.log", "Process 12: python foo.py\n", "generic"),           # py-spy needs its Thread line
    ("messages.json", CLOUD, "cloud_logging"),                    # content beats a kernel-ish name
    ("dmesg.txt", NVSMI, "nvidia_smi"),
    ("x.log", "Started up at the usual time\n", "generic"),
    ("x.log", "[ 12.5 ] progress\nstep 2\nstep 3\n", "generic"),
    ("train.log", "Driver Version: 535 (but no CUDA line)\n", "generic"),
    ("entries.json", json.dumps({"entries": [1, 2]}), "generic"),   # FR needs FR keys too
    # a worker log that mentions a tool is not its output; nvidia-smi -q atop a worker log stays the worker's
    ("slurm-12.out", "+ ibstat\n" + RANK_TB * 3, "slurm"),
    ("rank_3.log", RANK_TB + "# Avg bus bandwidth    : 220.9\n", "rank_log"),
    ("slurm-12.out", NVSMI_Q + RANK_TB * 3, "slurm"),
]


@pytest.mark.parametrize("rel,head,kind", CASES + NEAR_MISSES)
def test_sniff(rel, head, kind):
    data = head if isinstance(head, bytes) else head.encode()
    assert sniff(rel, data) == kind


def test_every_kind_has_a_row():
    assert {k for _, _, k in CASES} == ALL_KINDS


def test_worker_kinds_subset():
    assert WORKER_KINDS <= ALL_KINDS and "kernel" not in WORKER_KINDS and "fr_dump" not in WORKER_KINDS


def test_odd_bytes_and_crlf():
    assert sniff("x.log", b"\xff\xfe garbage \xc3\x28\r\n" + RANK_TB.encode().replace(b"\n", b"\r\n") * 3) == "rank_log"
    assert sniff("x.log", b"") == "generic"
    assert sniff("x.log", NEMO.encode() * 2000) == "nemo"        # > 8 KiB head is fine


def test_head_lines_split_at_every_line_end_like_a_regex():
    """sniff's line split (str methods, for speed on thousands of heads) cuts where `\\r\\n|\\r|\\n` cuts: tqdm redraws
    (`\\r`), Windows and mixed line ends, blank and whitespace-only pieces dropped; other Unicode separators stay."""
    import re
    from hypothesis import given, settings, strategies as st
    from trainlog_debugger.tools.sources.detect import _lines

    def by_regex(t: str) -> list[str]:
        return [ln for ln in re.split(r"\r\n|\r|\n", t) if ln.strip()]

    assert _lines("a\r\r\nb\rc\n\n \nd\u2028e") == ["a", "b", "c", "d\u2028e"] == by_regex("a\r\r\nb\rc\n\n \nd\u2028e")

    @settings(max_examples=500, deadline=None)
    @given(st.lists(st.sampled_from(["step 1", " ", "\r", "\n", "\r\n", "\t", "\x1c", "\u2028", "é"]), max_size=30))
    def prop(parts):
        t = "".join(parts)
        assert _lines(t) == by_regex(t)
    prop()


# ---- every source's own detection, found through the registry (nothing registered here by hand) -----------------

from trainlog_debugger.tools.sources import SOURCES  # noqa: E402
from trainlog_debugger.tools.sources.declare import TIERS, Detector  # noqa: E402
from trainlog_debugger.tools.sources.detect import HW_KINDS, detectors, head_of  # noqa: E402

DECLARED = [(src, i, d) for src, mod in SOURCES.items() for i, d in enumerate(getattr(mod, "DETECT", ()))]


def test_the_sources_declare_detection():
    # the loop has nothing of its own: every test it runs is a source's, every kind a source's KINDS
    assert len(DECLARED) == len(detectors()) >= 20
    assert {"pyspy", "ais", "torchrun", "hw", "flight_recorder", "slurm", "kernel"} <= {s for s, _, _ in DECLARED}


@pytest.mark.parametrize("src,i,det", DECLARED, ids=[f"{s}-{i}" for s, i, _ in DECLARED])
def test_every_detector_recognises_its_example_through_the_registry(src, i, det):
    assert isinstance(det, Detector) and det.tier in TIERS
    kind = det.test(head_of(*det.example))
    assert kind in SOURCES[src].KINDS, f"{src} DETECT[{i}] does not recognise its own example ({kind!r})"
    # and the whole tier loop, every other source's tests included, comes to the same answer: no stronger test of
    # another source takes the file first
    assert sniff(*det.example) == kind


def test_kinds_are_the_sources_kinds():
    declared = {k: role for mod in SOURCES.values() for k, role in getattr(mod, "KINDS", {}).items()}
    assert ALL_KINDS == set(declared) | {"generic"}
    assert HW_KINDS == {"nvidia_smi", "gpu_topo", "ib_status", "ib_counters", "nccl_tests", "dcgm_diag"}
    assert WORKER_KINDS == {"slurm", "torchrun", "rank_log", "nemo", "megatron", "deepspeed", "cloud_logging", "generic"}
