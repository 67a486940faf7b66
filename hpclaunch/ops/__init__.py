"""The use cases, with no click: a :class:`~hpclaunch.ops.session.Session` holds the
settings, the site, the runner and the backend; the CLI commands call it and print."""
