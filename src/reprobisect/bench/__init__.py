"""What ``reprobisect bench`` measures, apart from its command line: a cell's cost to build cold and warm against
virtualenv+pip, what the harness adds to each run, the workloads (``figures``), and a GPU run's cost and how much of
it is the harness's (``gpu``). A package of its own below ``commands/``, so that the command stays the thin reading
of its options (issue #53)."""
