"""Functions as jobs: ``Session.submit(fn, *args)`` and what runs them inside the job.

The submitter pickles the call into ``<job dir>/call/call.pkl`` (:mod:`.payload`) and
submits a job whose command is ``python -m hpclaunch.calls``, under the sidecar like any
job (preemption: checkpoint, requeue, run again). In the job, :mod:`.__main__` checks the
environment, runs the function once and writes ``result.pkl`` atomically; the submitter's
``Job.result()`` reads it (:mod:`hpclaunch.ops.call`).
"""
