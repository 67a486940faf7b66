"""Notifications of a job's events: the messages, how they are sent (webhooks, e-mail), and
the job directory's outbox that makes each one go out once, from the node or later from the
login node (:mod:`hpclaunch.notify.outbox`)."""
