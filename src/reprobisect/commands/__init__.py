"""The command line, one module per subcommand (as asv's ``commands/``).

Each command module has ``setup_arguments(subparsers)``, which adds its parser and sets ``run`` to its
``run_from_args(args) -> int``, which first reads the parsed command line into one frozen options object of the
command's own (``BisectOptions``, ``MatrixOptions``, ...) and hands that to its steps. ``options``,
``script_options``, ``engine_options``, ``run_options`` and ``timing_options`` hold the option groups several
commands share (``CommonOptions``, ``ScriptOptions``, ``EngineOptions``, ``RunOptions``, ``TimingOptions``, composed
into those objects), ``output`` how a run command ends its session, ``main`` the entry point; what ``bench``
measures is the ``bench`` package's. These modules import from the library
packages; nothing outside ``commands/`` imports from them, and no ``Namespace`` goes below them.
"""
