"""Pure decisions, from a spec and a site to what is submitted: the plan (sbatch options and why),
quota placement, tier moves, sweeps as arrays, pipelines' order, the rendered script, the
checks against the live cluster and the site plan (sacctmgr commands).
"""
