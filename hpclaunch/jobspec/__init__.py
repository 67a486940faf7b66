"""What the user writes: the job spec (pydantic), its tiers, and its generated field reference.

Import from the submodules (:mod:`hpclaunch.jobspec.job`); this package imports nothing, so the
site config can name the tiers without loading the spec's models.
"""
