"""tools/sources/torchrun/format.py: torch.distributed.elastic agent lines (FORMATS.md §2) and the real incidents.

Each row: a line exactly as emitted, the pattern ids the scanner records for it after the fallback rule, and the
fields each id extracts (a subset; None = absent). The agent header changed by torch version (§2.3): stdlib
BASIC_FORMAT ≤2.0, `[date] logger: [LEVEL]` 2.1–2.2, glog-like `W0813 ... tid path:line]` 2.3–2.4 (thread id) and
≥2.5 (pid); the triggers search the message, so every header must give the same facts.
"""

from __future__ import annotations

import pytest
from matching import check, params

EXIT = "torchrun.exitcode"
FAILED = "torchrun.worker_failed"
CLOSE = "torchrun.closing_signal"

CHILD_FAILED_REPORT = [
    ("report title (trailing space)",
     "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
     {"torchrun.child_failed": {}}),
    ("time field", "  time      : 2024-04-12_14:58:30",
     {"torchrun.failure_time": dict(month=4, day=12, hour=14, minute=58, second=30)}),
    ("host field", "  host      : f10de8a8e6e4", {"torchrun.failure_host": dict(host="f10de8a8e6e4")}),
    ("host field, FQDN", "  host      : node-17.cluster.local", {"torchrun.failure_host": dict(host="node-17.cluster.local")}),
    ("rank field", "  rank      : 12 (local_rank: 4)", {"torchrun.failure_rank": dict(failed_rank=12, failed_local_rank=4)}),
    ("≤2.11 real exitcode, killed",
     "  exitcode  : -9 (pid: 208585)",
     {EXIT: dict(exitcode=-9, pid=208585, signal=None)}),
    ("2.12+ exitcode with signal name (two spaces)",
     "  exitcode  : -9 (pid: 1234)  (SIGKILL)",
     {EXIT: dict(exitcode=-9, pid=1234, signal="SIGKILL")}),
    ("2.12+ exitcode, watchdog abort: SIGABRT is also process.sigabrt",
     "  exitcode  : -6 (pid: 1234)  (SIGABRT)",
     {EXIT: dict(exitcode=-6, pid=1234, signal="SIGABRT"), "process.sigabrt": {}}),
    ("2.12+ normal exit: trailing space, no signal",
     "  exitcode  : 1 (pid: 1234) ",
     {EXIT: dict(exitcode=1, pid=1234, signal=None)}),
    ("real traceback field: signal",
     "  traceback : Signal 9 (SIGKILL) received by PID 208585",
     {"torchrun.signal_received": dict(signum=9, signal="SIGKILL", pid=208585)}),
    ("traceback field without @record", "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html", {}),
    ("error_file N/A", "  error_file: <N/A>", {"torchrun.error_file": dict(error_file="<N/A>")}),
    ("no other failures", "  <NO_OTHER_FAILURES>", {}),
    ("root cause header", "Root Cause (first observed failure):", {}),
    ("border", "============================================================", {}),
]

AGENT = [
    # the teardown's escalation: `%s` of a signal is `Signals.SIGKILL` on Python ≤3.10 and `9` on ≥3.11
    ("teardown escalation, Python ≤3.10",
     "W0813 22:08:40.123000 2585 torch/distributed/elastic/multiprocessing/api.py:920] Unable to shutdown process 2711 "
     "via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL",
     {"torchrun.escalated_kill": dict(pid=2711, signal="Signals.SIGKILL")}),
    ("teardown escalation, Python ≥3.11",
     "W0813 22:08:40.123000 2585 torch/distributed/elastic/multiprocessing/api.py:920] Unable to shutdown process 2711 "
     "via 15, forcefully exiting via 9",
     {"torchrun.escalated_kill": dict(pid=2711, signal="9")}),
    ("≥2.5 real closing signal",
     "W0813 22:08:39.776000 2585 torch/distributed/elastic/multiprocessing/api.py:898] Sending process 2711 closing signal SIGTERM",
     {CLOSE: dict(pid=2711, signal="SIGTERM")}),
    ("≤2.0 stdlib header",
     "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 518 closing signal SIGTERM",
     {CLOSE: dict(pid=518, signal="SIGTERM")}),
    ("2.1-2.2 header",
     "[2024-04-12 14:58:30,123] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 518 closing signal SIGKILL",
     {CLOSE: dict(pid=518, signal="SIGKILL")}),
    ("2.1-2.2 header, failed binary",
     "[2024-04-12 14:58:30,123] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 3 (pid: 518) of binary: /usr/bin/python",
     {FAILED: dict(exitcode=-9, failed_local_rank=3, pid=518)}),
    ("2.3-2.4 header: thread id, absolute path",
     "E0813 22:08:40.123000 140215829362496 /opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 2710) of binary: /usr/bin/python",
     {FAILED: dict(exitcode=1, failed_local_rank=0, pid=2710)}),
    ("fn entrypoint",
     "E0813 22:08:40.123000 2585 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 2 (pid: 2712) of fn: train_main (start_method: spawn)",
     {FAILED: dict(exitcode=-6, failed_local_rank=2, pid=2712)}),
    ("worker group restart",
     "[default] Worker group FAILED. 2/3 attempts left; will restart worker group",
     {"torchrun.worker_group_restart": dict(state="FAILED", left=2, max=3)}),
    ("worker group restart with ≥2.5 header",
     "W0813 22:08:40.123000 2585 torch/distributed/elastic/agent/server/api.py:700] [default] Worker group UNHEALTHY. 0/3 attempts left; will restart worker group",
     {"torchrun.worker_group_restart": dict(state="UNHEALTHY", left=0, max=3)}),
    ("Python ≥3.11: death signal is the number",
     "W1105 12:00:00.000000 123 torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, shutting down workers",
     {"torchrun.death_signal": dict(signal="15")}),
    ("Python ≤3.10: death signal is Signals.SIGTERM (SIGTERM is process.killed, a fallback, dropped)",
     "W1105 12:00:00.000000 123 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers",
     {"torchrun.death_signal": dict(signal="Signals.SIGTERM")}),
    ("store timeout at start-up",
     "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 15/16 clients joined.",
     {"torchrun.rendezvous_timeout": dict(joined=15, expected=16)}),
    ("rendezvous timeout exception",
     "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
     {"torchrun.rendezvous_timeout": dict(joined=None)}),
    ("client socket timeout",
     "RuntimeError: The client socket has timed out after 1800s while trying to connect to (10.0.0.1, 29500).",
     {"torchrun.rendezvous_timeout": {}}),
]

INCIDENTS = [
    # speechbrain-timed-ckpt-collective-mismatch/torchelastic_summary.log, every line
    ("speechbrain: title", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", {"torchrun.child_failed": {}}),
    ("speechbrain: border", "============================================================", {}),
    ("speechbrain: entrypoint", "train.py FAILED", {}),
    ("speechbrain: rule", "------------------------------------------------------------", {}),
    ("speechbrain: Failures", "Failures:", {}),
    ("speechbrain: index is not a rank", "[1]:", {}),
    ("speechbrain: time", "  time      : 2021-11-26_21:07:21",
     {"torchrun.failure_time": dict(month=11, day=26, hour=21, minute=7, second=21)}),
    ("speechbrain: host", "  host      : f10de8a8e6e4", {"torchrun.failure_host": dict(host="f10de8a8e6e4")}),
    ("speechbrain: rank", "  rank      : 1 (local_rank: 1)", {"torchrun.failure_rank": dict(failed_rank=1, failed_local_rank=1)}),
    ("speechbrain: exitcode", "  exitcode  : 1 (pid: 267271)", {EXIT: dict(exitcode=1, pid=267271, signal=None)}),
    ("speechbrain: error_file", "  error_file: /tmp/torchelastic_d676diln/none_yafvf25t/attempt_0/1/error.json",
     {"torchrun.error_file": dict(error_file="/tmp/torchelastic_d676diln/none_yafvf25t/attempt_0/1/error.json")}),
    ("two-jobs-same-node-default-port-29500/combined.log",
     "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).",
     {"torchrun.address_in_use": dict(address="[::]:29500")}),
]

NEAR_MISSES = [
    ("worker group state line", "[default] Worker group in FAILED state", {}),
    ("rendezvous line", "[default] Rendezvous'ing worker group", {}),
    ("a 'host:' line outside the failure report", "  host: gpu-node-17", {}),
    ("a 'Hostname :' line", "  Hostname      : gpu-node-17", {}),
    ("launcher config echo", "  rdzv_configs     : {'timeout': 900}", {}),
]


@pytest.mark.parametrize("line, expected", params(CHILD_FAILED_REPORT))
def test_child_failed_report(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(AGENT))
def test_agent_messages(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(INCIDENTS))
def test_incident_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)


# ------------------------------------------------------------------ the failure report's hosts (torchrun/nodes.py)

REPORT = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-11-05_12:34:57
  host      : gpu-node-18
  rank      : 6 (local_rank: 2)
  exitcode  : -6 (pid: 14553)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 14553
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-11-05_12:34:56
  host      : gpu-node-17
  rank      : 5 (local_rank: 1)
  exitcode  : -9 (pid: 14548)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 14548
============================================================
"""


def test_the_failure_report_states_each_failed_ranks_host(tmp_path):
    """The scan step torchrun declares (SCAN_STEPS file_nodes): `host :` then `rank :` within 3 lines places the
    rank on that host, cited by the host line; the summary keeps it in rank_nodes."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.scan.driver import scan_bundle
    from trainlog_debugger.tools.sources.torchrun.nodes import failure_nodes

    (tmp_path / "launcher.log").write_text(REPORT)
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b, workers=1)
    (f,) = res.files
    stated = failure_nodes(f)
    assert [(line, r, ev.node, ev.line, ev.text) for line, r, ev in stated] == [
        (9, 6, "gpu-node-18", 8, "  host      : gpu-node-18"), (18, 5, "gpu-node-17", 17, "  host      : gpu-node-17")]
    assert {r: (ev.node, ev.line) for r, ev in res.rank_nodes.items()} == {6: ("gpu-node-18", 8), 5: ("gpu-node-17", 17)}


def test_a_rank_line_far_from_its_host_line_is_not_paired(tmp_path):
    """A `rank :` line more than 3 lines below the last `host :` line states no host (another block's host)."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.scan.driver import scan_bundle
    from trainlog_debugger.tools.sources.torchrun.nodes import failure_nodes

    far = REPORT.replace("  host      : gpu-node-17\n", "  host      : gpu-node-17\n  a : b\n  c : d\n  e : f\n")
    (tmp_path / "launcher.log").write_text(far)
    with open_bundle(tmp_path) as b:
        (f,) = scan_bundle(b, workers=1).files
    assert [r for _line, r, _ev in failure_nodes(f)] == [6]


def test_torchrun_declares_its_scan_steps():
    from trainlog_debugger.tools.sources import resolve
    from trainlog_debugger.tools.sources.torchrun import format as torchrun
    from trainlog_debugger.tools.sources.torchrun.nodes import failure_nodes
    from trainlog_debugger.tools.sources.torchrun.rankmap import resolve as local_ranks
    assert resolve(torchrun.SCAN_STEPS["file_nodes"]) is failure_nodes
    assert resolve(torchrun.SCAN_STEPS["local_ranks"]) is local_ranks
