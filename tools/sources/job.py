"""Job facts printed at start-up: world size (so coverage knows how many ranks to expect), frameworks.

Real/constructed lines:
    using world size: 16, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 2
    Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16
    WORLD_SIZE=16
"""

from trainlog_debugger.tools.sources.pattern import P, WorldSize

PATTERNS = [
    P("job.world_size", 0, None, "context",
      r"(?:[Ww]orld[_ ][Ss]ize|WORLD_SIZE) ?[:=] ?\d", ("orld size", "orld_size", "WORLD_SIZE", "orld_Size"),
      "using world size: 16, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 2",
      "world size stated in the logs", fields=r"(?:(?<!\w)|(?<=dist_)|(?<=global_)|(?<=distributed_))(?:[Ww]orld[_ ][Ss]ize|WORLD_SIZE) ?[:=] ?(?P<world_size>\d+)",
      ints=("world_size",),
      # the job's world, not a part of it: torchrun's rendezvous result prints `group_world_size=2` (its agents, one
      # per node: elastic/agent/server/api.py), LOCAL_WORLD_SIZE is one node's, `tensor_model_parallel_world_size`
      # a parallel group's (DeepSpeed's launcher's `dist_world_size=16`, fairseq's `distributed_world_size=8` and
      # `args.world_size = 16` are the job's)
      verify=r"(?:(?<!\w)|(?<=dist_)|(?<=global_)|(?<=distributed_))(?:[Ww]orld[_ ][Ss]ize|WORLD_SIZE) ?[:=] ?\d"),
    P("job.lightning_member", 0, None, "context",
      r"GLOBAL_RANK: \d+, MEMBER: \d+/\d", "MEMBER: ",
      "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16",
      "Lightning distributed init: rank and world size",
      fields=r"GLOBAL_RANK: (?P<global_rank>\d+), MEMBER: \d+/(?P<world_size>\d+)", ints=("global_rank", "world_size")),
    # Lightning's rank 0, once init_process_group returned on every member (fabric/utilities/distributed.py
    # _init_dist_connection; 1.x: `All DDP processes registered. Starting ddp with N processes`)
    P("job.lightning_registered", 0, None, "context",
      r"All (?:DDP|distributed) processes registered\. Starting", ("processes registered. Starting",),
      "All distributed processes registered. Starting with 16 processes",
      "Lightning: every member joined the process group"),
    # the trainer's or launcher's own end line; the scheduler's record of the job itself (sacct's row for the job id,
    # not a step's `.0`/`.batch`: State COMPLETED, ExitCode 0:0) and a pod that Kubernetes reports Succeeded (every
    # container exited 0: kubectl describe pod's `Status:`)
    P("job.finished", 0, None, "context",
      r"(?:worker group successfully finished|`Trainer\.fit` stopped: `max_(?:steps|epochs)=\d+` reached|[Tt]raining (?:completed|finished|complete)\b|\{'train_runtime': "
      r"|COMPLETED +0:0|Status: +Succeeded|Job '[^'\n]{1,128}' succeeded|Job \S+ (?:is )?successfully completed\.|Final validation metrics: "
      r"|jobset completed successfully)",
      ("successfully finished", "Trainer.fit` stopped", "raining completed", "raining finished",
       "raining complete", "{'train_runtime': ", "COMPLETED ", "Succeeded", "' succeeded", " successfully completed.", "Final validation metrics: ",
       "jobset completed successfully"),
      "I1105 14:00:00.000000 2585 torch/distributed/elastic/agent/server/api.py:862] [default] worker group successfully finished. Waiting 300 seconds for other agents to finish.",
      "the job says it finished normally",
      # (not Ray Tune's per-report line `Training finished iteration 3 at 2025-08-20 08:40:43. Total running time:
      # ..` (tune/experimental/output.py), one per reported iteration; its end line is `Training completed after N
      # iterations at ..`)
      verify=r"(?:worker group successfully finished|`Trainer\.fit` stopped: `max_(?:steps|epochs)=\d+` reached|[Tt]raining (?:completed|finished|complete)\b(?! iteration \d)|\{'train_runtime': "
             r"|^\s*\d+(?:_\d+)?(?: +\S+)*? +COMPLETED +0:0\b|^Status: +Succeeded\s*$"
             # the Ray Jobs CLI once the submitted job's driver exited 0 (dashboard/modules/job/cli.py
             # _log_job_status: JobStatus.SUCCEEDED; its twins say `failed` and `was stopped`)
             r"|^Job '[\w.:-]{1,128}' succeeded\s*$"
             # the Kubeflow training operator's event and condition once the job's master (or every worker) exited 0
             # (pkg/controller.v1/pytorch/pytorchjob_controller.go:391/410, and its TFJob, MPIJob, PaddleJob, JAXJob
             # and XGBoostJob twins: `PyTorchJob t5-pt is successfully completed.`, `PyTorchJob ns/t5-pt successfully
             # completed.`)
             r"|\b(?:PyTorch|TF|MPI|Paddle|JAX|XGBoost)Job [\w./-]{1,253} (?:is )?successfully completed\."
             # verl's PPO trainer on its last step, just before fit() returns (verl/trainer/ppo/ray_trainer.py:1713,
             # pprint: a long one as a quoted tuple, `("Final validation metrics: {...}")`)
             r"|(?:^|[\s(\"'])Final validation metrics: (?:\{|None))"
             # JobSet's condition once every child Job completed (kubernetes-sigs/jobset pkg/constants
             # AllJobsCompletedMessage, with reason AllJobsCompleted; kubectl describe jobset, its events)
             r"|(?-i:\bjobset completed successfully\b)"),
    # Megatron-LM's phase marker (training.py pretrain(): print_datetime('after training is done')): the loop is over,
    # and the final checkpoint, the final evaluation and the async-save finalisation come after it in the same
    # function. The job got past set-up and training; it is no proof that the job ended (diagnose._stops_after_training)
    P("job.training_done", 0, None, "context",
      r"\[after training is done\]", ("after training is done",),
      "[after training is done] datetime: 2024-11-05 14:00:00",
      "the training loop is over (Megatron): the final save, evaluation and exit follow"),
    P("job.resumed", 0, None, "context",
      r"(?:[Rr]esuming (?:training )?from|[Ll]oading checkpoint from|Restoring states from the checkpoint|successfully loaded checkpoint from)",
      ("esuming", "oading checkpoint from", "Restoring states from the checkpoint", "loaded checkpoint from"),
      " successfully loaded checkpoint from /checkpoints/gpt-8b [ t 0/1, p 0/1 ] at iteration 3000",
      "the job resumed from a checkpoint"),
]

# the job's world size as its launcher or trainer states it (what coverage expects before anything else)
WORLD_SIZE = {"job.world_size": WorldSize("world_size", 0, "world size in the logs"),
              "job.lightning_member": WorldSize("world_size", 0, "world size in the logs")}
