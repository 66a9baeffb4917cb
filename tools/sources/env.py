"""Printed settings: the environment a job ran with and the interface NCCL/gloo picked. All context:
tools/rules/config.py decides what they mean. (The long phases a collective timeout must cover are read there from
where each rank's log stops, not scanned: a checkpoint-save line is printed every few hundred steps on a healthy run,
and a scan pattern for it would be per-line work on most of a large bundle.)

Real lines:
    node1:2345:2345 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0     (misc/socket.cc, all 2.x)
    node1:2345:2345 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.          (misc/param.cc: "%s ... %lld.")
    NCCL_DEBUG=INFO                                                                  (`env | grep NCCL`, one per line)
    + export NCCL_SOCKET_IFNAME=ib0                                                  (bash -x launch script)
    [rank0]:[W1111 11:55:57.148815586 Utils.hpp:112] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is
        deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())   (c10d Utils.hpp getCvar*, ≥2.2)
    node1:1:1 [0] NCCL INFO Warning: ENV NCCL_X is unused. Setting it has no effect.     (src/param/c_api.cc, ≥2.29)
    node1:2345:2345 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>                 (bootstrap.cc; NET/Socket alike)
    node1:2345:2400 [0] transport/net_socket.cc:61 NCCL WARN NET/Socket : no interface found
    RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find
        address for: eth1                                                            (GLOO_SOCKET_IFNAME names none)
"""

from trainlog_debugger.tools.sources.pattern import P

# the variable families whose names the config rules judge or read (GLOO_* for GLOO_SOCKET_IFNAME)
_NAME = r"(?:NCCL|TORCH_NCCL|TORCH_DISTRIBUTED|TORCH_FR|GLOO)_[A-Z0-9_]+"

PATTERNS = [
    P("env.nccl_set_by_env", 0, None, "context",
      r"NCCL INFO NCCL_[A-Z0-9_]+ set (?:by environment )?to ", "NCCL INFO NCCL_",
      "node1:2345:2345 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
      "NCCL read a variable from the environment (name and value)",
      fields=r"NCCL INFO (?P<name>NCCL_[A-Z0-9_]+) set (?:by environment )?to (?P<value>\S*?)\.?\s*$"),
    P("env.assignment", 0, None, "context",
      _NAME + r"=", ("NCCL_", "GLOO_", "TORCH_DISTRIBUTED_", "TORCH_FR_"),
      "+ export NCCL_SOCKET_IFNAME=ib0",
      "an environment variable printed as NAME=value (env dump, `export`, a launcher's -x/--env); a fallback, so that "
      "NCCL's and PyTorch's own hints (`run with NCCL_DEBUG=INFO for details`) inside an error line are not settings",
      fields=r"(?:^|[\s:\]])(?:\++ )?(?:export |declare -x |setenv )?(?P<name>" + _NAME + r")=(?P<value>\S*)\s*$",
      fallback=True),
    # the allocation's node count as the batch script's environment shows it (`env | grep SLURM`, an echo of it):
    # what a launch's node count must fit (tools/rules/config.py rendezvous_timeout)
    P("env.slurm_nodes", 0, None, "context",
      r"\bSLURM_(?:JOB_NUM_NODES|NNODES)=\d", ("SLURM_JOB_NUM_NODES=", "SLURM_NNODES="),
      "SLURM_JOB_ID=735400 SLURM_JOB_NUM_NODES=2 SLURM_NODELIST=gpu-g-[001-002]",
      "the number of nodes Slurm allocated to the job",
      fields=r"\b(?P<name>SLURM_(?:JOB_NUM_NODES|NNODES))=(?P<nodes>\d{1,6})\b", ints=("nodes",)),
    # and its host list (`SLURM_JOB_NODELIST=gpu-h[031-032]`): the job's nodes, including one whose ranks left no
    # line (tools/rules/scheduler.job_nodes)
    P("env.slurm_nodelist", 0, None, "context",
      r"\bSLURM_(?:JOB_)?NODELIST=\S", ("SLURM_JOB_NODELIST=", "SLURM_NODELIST="),
      "SLURM_JOB_NODELIST=gpu-h[031-032]",
      "the hosts Slurm allocated to the job",
      fields=r"\bSLURM_(?:JOB_)?NODELIST=(?P<nodelist>[^\s'\"]{1,4096})"),
    P("env.deprecated_torch", 0, None, "context",
      r"Environment variable [A-Z0-9_]+ is deprecated; use [A-Z0-9_]", "is deprecated; use ",
      "[rank0]:[W1111 11:55:57.148815586 Utils.hpp:112] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())",
      "PyTorch read a deprecated alias of one of its variables",
      fields=r"Environment variable (?P<name>[A-Z0-9_]+) is deprecated; use (?P<replacement>[A-Z0-9_]+) instead"),
    P("env.nccl_env_unused", 0, None, "context",
      r"Warning: ENV NCCL_[A-Z0-9_]+ is (?:unused|deprecated)", "Warning: ENV NCCL_",
      "node1:2345:2345 [0] NCCL INFO Warning: ENV NCCL_NET_SHARED_COMMS is unused. Setting it has no effect.",
      "NCCL says a variable that is set has no effect (unused) or will go away (deprecated)",
      fields=r"Warning: ENV (?P<name>NCCL_[A-Z0-9_]+) is (?P<state>unused|deprecated)"),
    P("env.nccl_iface_using", 0, None, "context",
      r"(?:Bootstrap|NET/Socket) ?: ?Using \[?[0-9A-Za-z]", "Using ",
      "node1:2345:2345 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:10.0.1.1<0>",
      "the interface(s) NCCL picked for bootstrap / socket traffic",
      # and its address (`ib0:10.10.9.10<0>`): whose host a peer address of a transport error is
      # (tools/rules/network.ib_completion)
      fields=r"(?P<what>Bootstrap|NET/Socket) ?: ?Using (?:\[\d+\])?(?P<iface>[^\s:\[]+):(?:(?P<addr>[^<\s]+)<)?"),
    P("env.nccl_iface_missing", 1, "config", "context",
      r"(?:NET/Socket ?: ?(?:[Nn]o interface found|No usable listening interface found)|no device found (?:matching|after excluding) )",
      ("NET/Socket", "no device found"),
      "node1:2345:2400 [0] transport/net_socket.cc:61 NCCL WARN NET/Socket : no interface found",
      "NCCL found no interface matching its interface setting (socket transport or OOB)",
      fields=r"(?P<warn>NET/Socket ?: ?(?:[Nn]o interface found|No usable listening interface found)|no device found (?:matching|after excluding) (?:exactly )?(?P<iface>\S+?),)"),
    P("env.gloo_iface_missing", 1, "config", "context",
      r"Unable to find address for: ", "Unable to find address for: ",
      "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: eth1",
      "gloo found no address for the interface it was given (GLOO_SOCKET_IFNAME)",
      fields=r"Unable to find address for: (?P<iface>\S+)"),
]
