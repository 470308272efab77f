"""Launch: from a rank plan to a running job.

Pure planners first, then the one module that runs a job over SSH:

- ``bindings``: what ``--report-bindings`` says each rank got, checked against the plan;
- ``wrapper``: the per-rank wrapper script and the job's per-host settings (NCCL, UCX, CUDA);
- ``mpirun``: the mpirun/DDL command line, its exports and hostfiles;
- ``forms``: the other launchers' forms (Horovod, DeepSpeed, torchrun, a hostfile);
- ``sbatch``: the Slurm batch script around the mpirun line;
- ``runner``: runs the planned mpirun on the first host and reports each rank's binding.
"""
