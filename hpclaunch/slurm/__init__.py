"""Everything about Slurm's own text and types: time formats, job states and refs, array task
ids, the parsers of squeue/sacct/scontrol/sacctmgr output, the cluster's capabilities, sbatch's
options, accounted usage. Tested on recorded output of each supported Slurm version.
"""
