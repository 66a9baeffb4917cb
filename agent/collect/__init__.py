"""`debugger collect`: gather the evidence of a live, hung job on one node (stack dumps of its ranks, GPU / fabric /
kernel snapshots) into a bundle that `debugger ask` reads. The I/O edge of the project: discovery.py finds the
training processes in /proc, snapshot.py runs the external commands (py-spy, nvidia-smi, ibstat, ...), bundle.py
lays the files out and writes the manifest. Reads only: nothing here signals or stops a process."""
