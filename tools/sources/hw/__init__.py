"""Hardware and fabric snapshots read as records (issue 13, item 2): nvidia-smi -q, nvidia-smi topo -m, ibstat,
ibv_devinfo, perfquery, nccl-tests and dcgmi diag, one pure parser per tool. format.py recognises each snapshot
(detection, the reader's catalog entry); read.py does the I/O and names each snapshot's node; report.py finds the node
out of line with its peers. Every value keeps the line it was read from."""
