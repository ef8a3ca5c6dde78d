"""The ``triton-trace`` commands, one module each, in the order ``--help`` lists them.

Each module has ``add_parser(sub)`` and ``run(args) -> exit status``; common.py holds what they share (exit
statuses, the one-line user error, loading a trace file). A new command is one module here and one entry in
``COMMANDS``. ``pytest`` is not here: cli.py hands it and everything after it to pytest (suite/command.py).
"""
COMMANDS = ("run", "view", "report", "diff", "repro", "ir")
