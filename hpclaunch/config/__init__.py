"""Configuration: the site (what the cluster offers) and settings (how hpclaunch runs).

Import from the submodules (:mod:`hpclaunch.config.site`, :mod:`hpclaunch.config.settings`);
this package imports nothing so that ``settings`` stays cheap to load.
"""
