"""The ecosystem's own messages as data: one table per upstream (NCCL, PyTorch, CUDA, the kernel, Slurm, ...).

Why tables and not patterns: the catalog's patterns (tools/sources/*) are what the scan looks for in every byte;
these tables are what the ecosystem itself says its messages mean. Each entry is a message as its source writes
it (`template`, with the placeholders of the upstream's own syntax), where it came from (`source`, a file:line in
the upstream at the table's `version`), what it means, its TAXONOMY `category` (or none, for a line that blames
nothing), its `role` (trigger: a first fault; cascade: a consequence of one; noise: harmless; context: a fact
about the job) and the `action` an engineer takes. A new upstream release is absorbed by re-checking its table
against a checkout (`python -m trainlog_debugger.eval.messages`), not by editing code.

The diagnosis reads a line through `match(text)`: every entry whose template the line contains, most specific
first (the most literal text). The tables are loaded on first use: a scan never imports them.

Table file (`<upstream>.yaml`):
    upstream: nccl                 # the table's name
    repo: NVIDIA/nccl              # where it was read (GitHub owner/name, or the documentation's URL)
    version: v2.27.7-1             # the tag or commit its file:line citations refer to
    syntax: printf                 # placeholders: printf (%s %d %lu %.2f ...), brace ({} {name} {x!r}), literal
    extract:                       # optional, for the checker: where call sites are, and how to find them
      files: ["src/**/*.cc"]
      calls: ['WARN\\(\\s*"((?:[^"\\\\]|\\\\.)*)"']
    messages:
      - template: "NET/IB : Got completion from peer %s with status=%d opcode=%d len=%u vendor err %d (%s)"
        source: src/transport/net_ib.cc:2050
        level: WARN                # as printed, where the producer prints levels
        category: network          # a TAXONOMY category, or null
        role: trigger              # trigger | cascade | noise | context
        meaning: one line
        action: one line
        example: a line the template prints (from a real log where one is known)
        regex: optional            # a Python regex to use instead of the one derived from the template
        name: optional             # an enum's name (cudaErrorNoDevice, Xid 79)
        number: optional           # its number
        status: optional           # what a job whose trigger is this line did: crashed (default), hung, slow,
                                   # cancelled (a planned walltime exit, a scheduler's signal)

The loader and matcher are in `catalog` (this package's __init__ stays import-free: tools/sources is what the
scanner loads, and a scan needs none of this); `lexicon.yaml` is the word list tools/rules/meaning.py reads a line
by when no table knows it.
"""

