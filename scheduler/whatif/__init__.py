"""What-if: would this job run now, where, after which evictions, and what is the smallest change
that makes it run, answered from the scheduler's own cache, plugins, quota and solvers without
changing anything (``docs/whatif.md``)."""
