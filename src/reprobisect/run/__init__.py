"""What runs a matrix, from plan to record: where runs happen (context, with the seam to an engine), the matrix run
(``matrix_plan`` → ``matrix_build`` → ``matrix_units``), one repro in one cell, the forms and fixes for this
machine, one run (``one_run``), the sandbox, one child process (``child_process``), its events and rendezvous ports,
where a run ran (measured). Nothing else: the record store is model/store.py, what the terminal shows
util/console.py and report/terminal.py, the bench figures bench/figures.py."""
