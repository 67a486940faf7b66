"""The use cases, with no click: a :class:`~hpclaunch.ops.context.Context` holds the
settings, the site, the runner and the backend; :class:`~hpclaunch.ops.session.Session`
offers the use cases as calls; the CLI commands call the same and print."""
