"""The command line, one module per subcommand (as asv's ``commands/``).

Each command module has ``setup_arguments(subparsers)``, which adds its parser and sets ``run`` to its
``run_from_args(args) -> int``, which first reads the parsed command line into one frozen options object of the
command's own (``BisectOptions``, ``MatrixOptions``, ...) and hands that to its steps. ``options``,
``script_options`` and ``engine_options`` hold the option groups several commands share (``CommonOptions``,
``ScriptOptions``, ``EngineOptions``, composed into those objects), ``output`` what they print at the end,
``bench_figures`` what ``bench`` measures, ``main`` the entry point. These modules import from the library
packages; nothing outside ``commands/`` imports from them, and no ``Namespace`` goes below them.
"""
