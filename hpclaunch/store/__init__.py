"""What hpclaunch remembers on this machine: the submission history (SQLite) and sweep records."""
