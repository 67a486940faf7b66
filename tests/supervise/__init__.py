"""Tests of the in-job supervisor (sidecar, signals, launchers) with real child processes."""
