"""The ``agenthost`` commands, one module each.

Every module has the same two functions: ``add_parser(sub, common)`` registers its
command(s) on the subparsers, and ``run(args, console)`` runs one (a module with several
commands, such as ``catalog``, dispatches on ``args.command``). :mod:`agenthost.cli.app`
builds the parser from the list of modules.
"""
