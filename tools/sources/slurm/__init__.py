"""SLURM: the lines slurmstepd and srun write into the job's output, and the task → node map srun's errors state."""
