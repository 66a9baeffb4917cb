"""Job facts printed at start-up: world size (so coverage knows how many ranks to expect), frameworks.

Real/constructed lines:
    using world size: 16, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 2
    Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16
    WORLD_SIZE=16
"""

from tools.patterns import P

PATTERNS = [
    P("job.world_size", 0, None, "context",
      r"(?:[Ww]orld[_ ][Ss]ize|WORLD_SIZE) ?[:=] ?\d", ("orld size", "orld_size", "WORLD_SIZE", "orld_Size"),
      "using world size: 16, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 2",
      "world size stated in the logs", fields=r"(?:[Ww]orld[_ ][Ss]ize|WORLD_SIZE) ?[:=] ?(?P<world_size>\d+)", ints=("world_size",)),
    P("job.lightning_member", 0, None, "context",
      r"GLOBAL_RANK: \d+, MEMBER: \d+/\d", "MEMBER: ",
      "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16",
      "Lightning distributed init: rank and world size",
      fields=r"GLOBAL_RANK: (?P<global_rank>\d+), MEMBER: \d+/(?P<world_size>\d+)", ints=("global_rank", "world_size")),
]
