"""A job spec's ``notify:``: who is told what happens to the job.

::

    notify:
      webhook: lab-slack      # a webhook saved with: hpclaunch notify add lab-slack URL
      email: me@uni.edu       # through the node's sendmail, or smtp: host:port
      events: [preempted, failed, completed]   # default: every event

Events: ``started``, ``preempted``, ``resumed`` (after a preemption or requeue), ``resized``,
``checkpoint_failed``, ``gpu_idle``, ``stopped_idle`` (the idle guard stopped it), ``failed``
(with the log's tail) and ``completed`` (with the run time and GPU-hours). A webhook's URL is
a secret: the spec names it, the URL stays in a private file (:mod:`hpclaunch.store.webhooks`),
never in the spec, the script or the history.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["NOTICE_EVENTS", "NoticeEvent", "Notify"]

NoticeEvent = Literal[
    "started",
    "preempted",
    "resumed",
    "resized",
    "checkpoint_failed",
    "gpu_idle",
    "stopped_idle",
    "failed",
    "completed",
]
NOTICE_EVENTS: tuple[NoticeEvent, ...] = get_args(NoticeEvent)
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_EMAIL = re.compile(r"^[^@\s,;<>\"']+@[^@\s,;<>\"']+$")


class Notify(BaseModel):
    """Where the job's events are sent, and which."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    webhook: str | None = Field(
        None,
        description="The name of a webhook saved with 'hpclaunch notify add NAME' "
        "(Slack-compatible JSON); never the URL itself, which is a secret.",
        examples=["lab-slack"],
    )
    email: str | None = Field(None, description="An address to mail the events to.")
    smtp: str | None = Field(
        None,
        description="host:port of an SMTP server for the mail (default: the node's sendmail).",
    )
    events: tuple[NoticeEvent, ...] = Field(
        NOTICE_EVENTS, min_length=1, description="The events to send (default: all)."
    )

    @field_validator("webhook")
    @classmethod
    def _a_name_not_a_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "://" in value or not _NAME.match(value):
            raise ValueError(
                "give the name of a saved webhook, not its URL (a secret that would land in "
                "the spec and the history): save it with 'hpclaunch notify add NAME' (it "
                "asks for the URL) and write webhook: NAME"
            )
        return value

    @field_validator("email")
    @classmethod
    def _one_address(cls, value: str | None) -> str | None:
        if value is not None and not _EMAIL.match(value):
            raise ValueError(f"{value!r} is not one e-mail address")
        return value

    @field_validator("smtp")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            host, _, port = value.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{value!r}: expected host:port, e.g. smtp.uni.edu:25")
        return value

    @model_validator(mode="after")
    def _somewhere(self) -> Notify:
        if self.webhook is None and self.email is None:
            raise ValueError("say where to: webhook: NAME, email: ADDRESS, or both")
        return self
