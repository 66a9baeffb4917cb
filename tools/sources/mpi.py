"""Open MPI's mpirun and Horovod (jobs launched with `mpirun`/`horovodrun` instead of torchrun).

Real lines (Open MPI 4.x `orterun` help texts, Horovod 0.2x `horovod/common/stall_inspector.cc` and
`horovod/common/operations.cc`):
    mpirun noticed that process rank 3 with PID 0 on node gpu-07 exited on signal 9 (Killed).
    Primary job  terminated normally, but 1 process returned
    Horovod has been shut down. This was caused by an exception on one of the ranks or an asynchronous completion of an operation.
    One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds.
mpirun's and Horovod's shutdown lines report a death, they do not explain it (cascade, like torchrun's
ChildFailedError); the stall inspector's warning is Horovod saying that ranks submitted different collectives,
which is TAXONOMY's `software` (mismatch / desync) unless a rank is simply stuck elsewhere.
"""

from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
    # `%s noticed that process rank ...` names the launcher as it was run: mpirun, mpiexec, orterun, prterun (Open
    # MPI 5), or a distribution's wrapper target (`mpirun.real`, `mpirun.openmpi`)
    P("mpi.process_exited", 1, None, "cascade",
      r"noticed that process rank \d+ with PID \d+ on node \S+ exited on signal", "noticed that process rank",
      "mpirun noticed that process rank 3 with PID 0 on node gpu-07 exited on signal 9 (Killed).",
      "mpirun reports a process killed by a signal",
      fields=r"process rank (?P<failed_rank>\d+) with PID (?P<pid>\d+) on node (?P<host>\S+) exited on signal (?P<signal>\d+)",
      ints=("failed_rank", "pid", "signal")),
    P("mpi.nonzero_exit", 1, None, "cascade",
      r"Primary job +terminated normally, but \d+ process(?:es)? returned", "terminated normally, but",
      "Primary job  terminated normally, but 1 process returned",
      "mpirun: a process returned a non-zero exit code"),
    # Open MPI 4's [node-died] help text (orte/mca/errmgr/base/help-errmgr-base.txt): `ORTE has lost communication
    # with a remote daemon.`, then `  HNP daemon   : [[18771,0],0] on node node-c11` (mpirun's own) and
    # `  Remote daemon: [[18771,0],1] on node node-c12`: the launcher's daemon on that node stopped answering, the node
    # died or dropped off the network: its ranks' peers' fabric errors are consequences (diagnose.NODE_FAILED). Not
    # PRTE's (Open MPI 5: `[prterun-host-34@0,1]`), which prints the same text when ssh to the node was refused at
    # launch (a setting, not a dead node)
    P("mpi.daemon_lost", 1, "infrastructure", "root_candidate",
      r"Remote daemon: +\[\[\d+,\d+\],\d+\] on node \S", "Remote daemon:",
      "  Remote daemon: [[18771,0],1] on node node-c12",
      "mpirun lost its link to the launcher daemon of a node: the node died, rebooted or left the network",
      fields=r"on node (?P<host>[A-Za-z0-9][\w.-]{0,127})", weight=0.8,
      advice="check that node (is it up? its kernel log and the scheduler's view of it); restart without it"),
    # horovodrun's gloo launcher on a worker's end (horovod/runner/gloo_run.py: `Process {idx} exit with status code
    # {ec}.`): the process index is the Horovod rank, and it ran the worker through a shell, so a status above 128 is
    # the signal that ended it (137: SIGKILL), as a shell reports it (tools.rules.infra.signalled_workers)
    P("horovod.process_exit", 1, None, "cascade",
      r"Process \d+ exit with status code -?\d", "exit with status code",
      "Process 2 exit with status code 137.",
      "horovodrun saw a worker process exit non-zero",
      fields=r"Process (?P<failed_rank>\d+) exit with status code (?P<status>-?\d+)", ints=("failed_rank", "status")),
    P("horovod.shutdown", 1, None, "cascade",
      r"Horovod has been shut down\. This was caused by an exception on one of the ranks", "Horovod has been shut down",
      "Horovod has been shut down. This was caused by an exception on one of the ranks or an asynchronous completion "
      "of an operation.",
      "Horovod shut down after an exception on some rank"),
    P("horovod.stall", 2, "software", "root_candidate",
      r"submitted to be reduced, gathered or broadcasted by subset of ranks", "submitted to be reduced",
      "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
      "for remainder of ranks for more than 60 seconds.",
      "Horovod: only some ranks submitted a collective (ranks on different code paths, or one rank stuck)",
      weight=0.6, status="hung",
      advice="find the ranks missing from Horovod's 'Missing ranks' list and what they were doing; make every rank "
             "submit the same tensors in the same order"),
]
