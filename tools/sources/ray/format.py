"""Ray's own lines that state which training rank a worker process is (FORMATS.md §0): the patterns, and the scan
step that gives a Ray worker's other lines that rank (ranks.py, declared here as SCAN_STEPS and imported on use).

Ray prefixes every line an actor prints with the actor's class, pid and node IP, never with a rank:

    (RayTrainWorker pid=40226, ip=10.0.0.3) Setting up process group for: env:// [rank=6, world_size=8]
    (TorchTrainer pid=3012) - (node_id=f67b.., ip=10.0.0.3, pid=40226) world_rank=6, local_rank=2, node_rank=1
"""

from __future__ import annotations

from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
    # python/ray/train/torch/config.py (_setup_torch_process_group): logger.info(f"Setting up process group for:
    # {url} [rank={world_rank}, world_size={world_size}]")
    P("ray.train_worker_rank", 0, None, "context",
      r"Setting up process group for: \S+ \[rank=\d", "Setting up process group for: ",
      "(RayTrainWorker pid=40226, ip=10.0.0.3) Setting up process group for: env:// [rank=6, world_size=8]",
      "a Ray Train worker states its world rank (its pid and node are in Ray's line prefix)",
      fields=r"\[rank=(?P<world_rank>\d{1,7}), world_size=(?P<world_size>\d{1,7})\]", ints=("world_rank", "world_size")),
    # python/ray/train/_internal/backend_executor.py (_create_rank_world_size_mappings): the trainer's table of its
    # workers, one line each, `- (node_id={node_id}, ip={node_ip}, pid={pid}) world_rank={i}, local_rank={..},
    # node_rank={..}` (before Ray 2.10 without `node_id=`), under the trainer's own prefix. Only rank 0 prints the
    # set-up line above, so this table is what names every other worker's rank.
    P("ray.train_worker_table", 0, None, "context",
      r"pid=\d{1,10}\) world_rank=\d", ") world_rank=",
      "(TorchTrainer pid=71127) - (node_id=9f2c34ea47fe405f3227e9168aa857f8, ip=10.216.70.82, pid=75299) world_rank=1, "
      "local_rank=1, node_rank=0",
      "Ray Train's table of its workers: each worker's node IP, pid and world rank",
      fields=r"ip=(?P<ip>[\w.:\-]+), pid=(?P<pid>\d{1,10})\) world_rank=(?P<world_rank>\d{1,7})", ints=("world_rank",)),
]
SCAN_STEPS = {"local_ranks": "trainlog_debugger.tools.sources.ray.ranks:actor_ranks"}
