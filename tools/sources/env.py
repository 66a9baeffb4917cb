"""Printed settings: the environment a job ran with, the interface NCCL/gloo picked, and the long phases whose length
those settings (the collective timeout) must cover. All context: tools/rules/config.py decides what they mean.

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
Phases (Megatron-LM checkpointing.py / megatron.core datasets, DeepSpeed torch_checkpoint_engine.py, HF Trainer):
    saving checkpoint at iteration    1000 to /ckpt in torch_dist format  ...  successfully saved checkpoint from iteration    1000 to /ckpt
    [Torch] Saving /ckpt/global_step100/mp_rank_00_model_states.pt...  ...  [Torch] Saved /ckpt/...
    	Build and save the document index to 6a1c...-GPTDataset-train-document_index.npy  ...  	> time elapsed: 812.3 seconds
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
      fields=r"(?P<what>Bootstrap|NET/Socket) ?: ?Using (?:\[\d+\])?(?P<iface>[^\s:\[]+):"),
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
    # -- long phases: a start without its end on the same rank is a phase still running when the logs stop
    P("phase.ckpt_save_start", 0, None, "context",
      r"(?:saving checkpoint at iteration|Saving model checkpoint|\[Torch\] Saving /)",
      ("saving checkpoint at iteration", "Saving model checkpoint", "[Torch] Saving /"),
      " saving checkpoint at iteration    1000 to /ckpt/gpt in torch_dist format",
      "a checkpoint save started", fields=r"(?:iteration\s+(?P<iteration>\d+) to |checkpoint:? (?:to )?|Saving )(?P<path>/\S+)",
      ints=("iteration",)),
    P("phase.ckpt_save_end", 0, None, "context",
      r"(?:successfully saved checkpoint|\[Torch\] Saved /|zero checkpoint saved|Checkpoint \S+ is ready now)",
      ("successfully saved checkpoint", "[Torch] Saved /", "zero checkpoint saved", " is ready now"),
      "  successfully saved checkpoint from iteration    1000 to /ckpt/gpt [ t 1/8, p 1/1 ]",
      "a checkpoint save finished", fields=r"(?:iteration\s+(?P<iteration>\d+)|Saved (?P<path>/\S+?)\.?$|Checkpoint (?P<tag>\S+) is ready)",
      ints=("iteration",)),
    P("phase.index_build_start", 0, None, "context",
      r"(?:Build and save the (?:document|sample|shuffle) index|> building (?:indices|shuffle index|sample index)|> compiling dataset index builder)",
      ("Build and save the", "> building ", "> compiling dataset index builder"),
      "\tBuild and save the document index to 6a1c0b2e-GPTDataset-train-document_index.npy",
      "a dataset index build started (megatron: on one rank while the others wait)",
      fields=r"(?P<what>Build and save the \w+ index|building (?:indices|shuffle index|sample index)|compiling dataset index builder)"),
    P("phase.index_build_end", 0, None, "context",
      r"(?:> time elapsed: \d|> finished creating|done with dataset index builder|> ela[ps]+ed time to build and save)",
      ("> time elapsed: ", "> finished creating", "done with dataset index builder", "time to build and save"),
      "\t> time elapsed: 812.300000 seconds",
      "a dataset index build finished", fields=r"(?:time elapsed: (?P<seconds>[\d.]+)|(?P<what>finished creating[^.]*|done with dataset index builder))"),
]
