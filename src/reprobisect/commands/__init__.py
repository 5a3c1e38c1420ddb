"""The command line, one module per subcommand (as asv's ``commands/``).

Each command module has ``setup_arguments(subparsers)``, which adds its parser and sets ``run`` to its
``run_from_args(args) -> int``; ``options`` holds what several commands share, ``output`` what they print at
the end, ``bench_figures`` what ``bench`` measures, ``main`` the entry point. These modules import from the library
packages; nothing outside ``commands/`` imports from them.
"""
