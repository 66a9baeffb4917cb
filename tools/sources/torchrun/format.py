"""torch.distributed.elastic / torchrun agent lines (FORMATS.md §2).

Real lines:
    W0813 22:08:39.776000 2585 torch/distributed/elastic/multiprocessing/api.py:898] Sending process 2711 closing signal SIGTERM
      exitcode  : -9 (pid: 208585)
      traceback : Signal 9 (SIGKILL) received by PID 208585
The agent's "Root Cause (first observed failure)" is only the first rank to EXIT, often a rank that was itself
waiting; these lines are cascade unless nothing earlier explains them.

Its file layout is known here and nowhere else (detection, the path hint, the local→global rank map of
rankmap.py): with `--log-dir`, each worker's output is `<log dir>/<run id>/attempt_<restart>/<local rank>/stderr.log`
(and stdout.log, error.json), which names the local rank and the restart, never the global rank. Without it, the
console carries `[default3]:` (`--tee`) or `[rank3]:` prefixes; a file whose lines mostly start so, or that is named
`rank_3.log`, is one rank's output (kind `rank_log`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainlog_debugger.tools.sources.declare import Detector, Head, PathRule, has, share
from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
    P("torchrun.child_failed", 1, None, "cascade",
      r"ChildFailedError", "ChildFailedError",
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
      "torchrun reports failed worker processes"),
    P("torchrun.failure_rank", 0, None, "context",
      r" rank      : \d+ \(local_rank: \d", "(local_rank: ",
      "  rank      : 1 (local_rank: 1)",
      "ChildFailedError entry: global and local rank",
      fields=r"rank +: (?P<failed_rank>\d+) \(local_rank: (?P<failed_local_rank>\d+)\)", ints=("failed_rank", "failed_local_rank")),
    # the entry's `time : 2024-11-05_09:14:02` (torch/distributed/elastic/multiprocessing/errors: the failure's
    # timestamp, when the worker exited): an upper bound for when that rank's own undated error happened
    P("torchrun.failure_time", 0, None, "context",
      r"\btime {2,}: \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d", "time      : ",
      "  time      : 2024-11-05_09:14:02",
      "ChildFailedError entry: when the failed rank exited",
      fields=r"time +: \d{4}-(?P<month>\d\d)-(?P<day>\d\d)_(?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)",
      ints=("month", "day", "hour", "minute", "second")),
    P("torchrun.failure_host", 0, None, "context",
      r" host      : \S", "host      : ",
      "  host      : f10de8a8e6e4",
      "ChildFailedError entry: host of the failed rank", fields=r"host +: (?P<host>\S+)"),
    P("torchrun.error_file", 0, None, "context",
      r"  error_file: [^ \n]", "error_file: ",
      "  error_file: /tmp/torchelastic_d676diln/none_yafvf25t/attempt_0/1/error.json",
      "ChildFailedError entry: the failed rank's error file (its log-dir path names the local rank)",
      fields=r"error_file: (?P<error_file>\S+)"),
    P("torchrun.exitcode", 1, None, "cascade",
      r" exitcode  : -?\d+ \(pid: \d+\)", "exitcode  : ",
      "  exitcode  : -9 (pid: 208585)",
      "worker exit code", fields=r"exitcode +: (?P<exitcode>-?\d+) \(pid: (?P<pid>\d+)\)(?: +\((?P<signal>SIG[A-Z]+)\))?", ints=("exitcode", "pid")),
    P("torchrun.signal_received", 1, None, "cascade",
      r"Signal \d+ \(SIG[A-Z]+\) received by PID", "received by PID",
      "  traceback : Signal 9 (SIGKILL) received by PID 208585",
      "worker died from a signal", fields=r"Signal (?P<signum>\d+) \((?P<signal>SIG[A-Z]+)\) received by PID (?P<pid>\d+)", ints=("signum", "pid")),
    P("torchrun.closing_signal", 1, None, "cascade",
      r"Sending process \d+ closing signal SIG[A-Z]", "closing signal",
      "W0813 22:08:39.776000 2585 torch/distributed/elastic/multiprocessing/api.py:898] Sending process 2711 closing signal SIGTERM",
      "launcher sends a signal to its workers", fields=r"Sending process (?P<pid>\d+) closing signal (?P<signal>SIG[A-Z]+)", ints=("pid",)),
    P("torchrun.worker_failed", 1, None, "cascade",
      r"failed \(exitcode: -?\d+\) local_rank: \d", "failed (exitcode: ",
      "E0813 22:08:40.123000 2585 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 2710) of binary: /usr/bin/python",
      "torchrun: a local worker exited non-zero",
      fields=r"failed \(exitcode: (?P<exitcode>-?\d+)\) local_rank: (?P<failed_local_rank>\d+) \(pid: (?P<pid>\d+)\)", ints=("exitcode", "failed_local_rank", "pid")),
    P("torchrun.death_signal", 1, "infrastructure", "root_candidate",
      r"Received \S+ death signal, shutting down workers", "death signal, shutting down workers",
      "W1105 12:00:00.000000 123 torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, shutting down workers",
      "the launcher itself was signalled (scheduler cancel, preemption)",
      fields=r"Received (?P<signal>\S+) death signal"),
    P("torchrun.worker_group_restart", 1, None, "cascade",
      r"Worker group (?:FAILED|UNHEALTHY)\. \d+/\d+ attempts left", "attempts left",
      "[default] Worker group FAILED. 2/3 attempts left; will restart worker group",
      "elastic agent restarts the worker group",
      fields=r"Worker group (?P<state>FAILED|UNHEALTHY)\. (?P<left>\d+)/(?P<max>\d+) attempts left", ints=("left", "max")),
    # the agent's rendezvous closed under it (torch/distributed/elastic/rendezvous/api.py RendezvousClosedError,
    # raised by dynamic_rendezvous.py when another agent closed the rendezvous: that agent's workers failed, or it
    # was shut down): the launcher's own traceback, a consequence, never a worker's failure
    P("torchrun.rendezvous_closed", 1, None, "cascade",
      r"\bRendezvousClosedError\b", "RendezvousClosedError",
      "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
      "the elastic agent's rendezvous was closed by another agent (its workers failed, or it shut down)"),
    P("torchrun.rendezvous_timeout", 1, "config", "root_candidate",
      r"(?:RendezvousTimeoutError|Timed out after \d+ seconds waiting for clients|The client socket has timed out after)",
      ("RendezvousTimeoutError", "waiting for clients", "client socket has timed out"),
      "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 15/16 clients joined.",
      "rendezvous / store timeout at start-up",
      fields=r"(?P<joined>\d+)/(?P<expected>\d+) clients joined", ints=("joined", "expected")),
    # the agent's teardown (elastic/multiprocessing/api.py _close): a worker that ignored the SIGTERM is SIGKILLed;
    # `%s` of a signal prints `Signals.SIGTERM` before Python 3.11 and the number after (`via 15, forcefully exiting
    # via 9`). Its exit -9 is the teardown's (tools.rules.infra.escalated_pids), not a killer's from outside
    P("torchrun.escalated_kill", 1, None, "cascade",
      r"Unable to shutdown process \d+ via \S+, forcefully exiting via", "forcefully exiting via",
      "W1022 14:29:46.120000 77120 torch/distributed/elastic/multiprocessing/api.py:917] Unable to shutdown process "
      "77188 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL",
      "the elastic agent SIGKILLed a worker that ignored its SIGTERM in the teardown",
      fields=r"Unable to shutdown process (?P<pid>\d{1,10}) via \S+, forcefully exiting via "
             r"(?P<signal>(?:Signals\.)?SIGKILL|9)\b", ints=("pid",)),
    P("torchrun.launch_config", 0, None, "context",
      r"  (?:run_id|rdzv_endpoint|rdzv_backend|min_nodes|max_nodes) +: \S",
      ("run_id ", "rdzv_endpoint ", "rdzv_backend ", "min_nodes ", "max_nodes "),
      "I1124 03:54:48.120000 30792 torch/distributed/launcher/api.py:254]   run_id                   : 73143",
      "the elastic agent's launch configuration (one line per setting): which rendezvous each agent joined",
      fields=r"(?:(?P<pid>\d+) \S*launcher/api\.py:\d+\])? +(?P<key>run_id|rdzv_endpoint|rdzv_backend|min_nodes|max_nodes)"
             r" +: (?P<value>\S+)"),
    P("torchrun.address_in_use", 1, "config", "root_candidate",
      r"(?:Address already in use|failed to listen on any local network address)",
      ("Address already in use", "failed to listen on any local network address"),
      "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
      "rendezvous port already in use", fields=r"bind to (?P<address>\S+?) \(errno",
      # not NCCL's RAS failing to bind its client port (ras/client_support.cc: `Call to bind failed: Address already
      # in use`, then `RAS failed to establish a client listening socket`): RAS serves only the ncclras query tool,
      # and the job goes on without it (another job's RAS on the node holds the shared port 28028)
      verify=r"^(?!.*\bras/client_support\.cc:).*(?:Address already in use|failed to listen on any local network "
             r"address)"),
]
# steps over the per-file scans (tools.scan.summary): local → global ranks from the failure report and the log-dir
# layout (rankmap), and the failure report's host of each failed rank (nodes)
SCAN_STEPS = {"local_ranks": "trainlog_debugger.tools.sources.torchrun.rankmap:resolve",
              "file_nodes": "trainlog_debugger.tools.sources.torchrun.nodes:failure_nodes"}


# ---- the files torchrun writes ---------------------------------------------------------------------------------------
TORCHRUN, RANK_LOG = "torchrun", "rank_log"
KINDS = {TORCHRUN: "worker", RANK_LOG: "worker"}
LOG_FILES = ("stderr.log", "stdout.log", "error.json")
# THE --log-dir layout: `<run dir>/attempt_<N>/<local rank>/<file>`; the run dir (`<log dir>/<run id>`) is absent
# when the path starts at `attempt_N/`. Archive members count from their own root (`a.tgz!run/attempt_0/3/x`).
_LOG_DIR = re.compile(r"(?:^|[/!])(?:(?P<run>(?:[^/!]*/)*?(?P<name>[^/!]+))/)?attempt_(?P<attempt>\d{1,7})/"
                      r"(?P<local>\d{1,7})/(?P<file>[^/!]+)$")


@dataclass(frozen=True, slots=True)
class LogDirFile:
    run: str | None          # `logs/7310_ab` of `logs/7310_ab/attempt_0/3/stderr.log` (None: path starts at attempt_N)
    run_name: str | None     # its last part, `7310_ab`: what an error_file path and a bundle path share
    attempt: int
    local_rank: int
    file: str


def log_dir_file(path: str) -> LogDirFile | None:
    """Where in a torchrun --log-dir tree `path` lies, for any file in a local rank's folder."""
    m = _LOG_DIR.search(path)
    if not m:
        return None
    return LogDirFile(m["run"], m["name"], int(m["attempt"]), int(m["local"]), m["file"])


def log_dir_log(path: str) -> LogDirFile | None:
    """The same, only for the files torchrun itself writes there (LOG_FILES)."""
    f = log_dir_file(path)
    return f if f is not None and f.file in LOG_FILES else None


_CONTENT = re.compile(r"torch[./]distributed[./](?:elastic|run\b)|ChildFailedError|torch/distributed/run\.py:\d+\]")
_PREFIXES = r"(?:\s{0,8}\d{1,6}: |[\w.-]{1,64}: |\[[a-z_]{0,32}\d{1,6}\]:){0,3}"  # srun/pdsh/tee tags
_RANK_LINE = re.compile(_PREFIXES + r"\[rank\d+\]:")
_TEE_LINE = re.compile(r"(?:\s{0,8}\d{1,6}: |[\w.-]{1,64}: ){0,2}\[[a-z_]{1,32}\d{1,6}\]:")  # [default3]:
_RANK_NAME = re.compile(r"(?:^|[/_.-])rank[_-]?\d+(?:[_.-][\w-]+)*\.(?:log|txt|out|err)$", re.I)


def _console(h: Head) -> str | None:
    """The agent's own lines, or a console whose lines mostly carry `--tee` prefixes."""
    if has(_CONTENT, h.text, "torch", "ChildFailedError") or share(_TEE_LINE, h.lines, h.text, "]:") >= 0.5:
        return TORCHRUN
    return None


def _log_dir_hint(path: str) -> tuple[str, dict[str, object]] | None:
    f = log_dir_log(path.rsplit("!", 1)[-1])
    return ("torchrun_logdir", {"attempt": f.attempt, "local_rank": f.local_rank}) if f else None


DETECT = (
    Detector("layout", 10, lambda h: TORCHRUN if log_dir_log(h.path) else None,
             ("logs/7310_ab/attempt_0/3/stderr.log", b"hello\n")),
    Detector("framing", 40, lambda h: RANK_LOG if share(_RANK_LINE, h.lines, h.text, "[rank") >= 0.5 else None,
             ("combined.log", b"[rank0]: Traceback (most recent call last):\n[rank1]: RuntimeError: boom\n")),
    Detector("framing", 50, _console, ("console.log", b"[default0]:step 10 loss 2.1\n[default1]:step 10 loss 2.2\n")),
    Detector("name", 10, lambda h: RANK_LOG if _RANK_NAME.search(h.name) else None, ("out/rank_3.log", b"(empty)\n")),
)
PATH_HINTS = (PathRule("path", 10, _log_dir_hint, "logs/7310_ab/attempt_1/3/stderr.log"),)
