"""Who runs when: the simulator (:mod:`~hpclaunch.scheduling.simulate`) and the live arbiter
(:mod:`~hpclaunch.scheduling.arbiter`), which share the victim choice.
"""
