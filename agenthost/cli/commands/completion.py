"""``agenthost completion bash|zsh|fish``: the shell code that completes agenthost's
commands and options (argcomplete: the completions come from the CLI's own parser, so
they never drift from it)."""

from __future__ import annotations

import argparse
from typing import Any

from agenthost.cli.common import add_command
from agenthost.cli.exit import EXIT_OK
from agenthost.cli.render import Console

__all__ = ["SHELLS", "add_parser", "run"]

SHELLS = ("bash", "zsh", "fish")

_HOW = """\
install (once):
  bash:  agenthost completion bash >> ~/.bashrc
  zsh:   agenthost completion zsh > "${fpath[1]}/_agenthost"   (or >> ~/.zshrc)
  fish:  agenthost completion fish > ~/.config/fish/completions/agenthost.fish
"""


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``completion`` on the CLI's subparsers."""
    parser = add_command(
        sub, common, "completion", "print the shell code that completes agenthost's commands"
    )
    parser.epilog = _HOW
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("shell", choices=SHELLS, help="the shell to print the code for")


async def run(args: argparse.Namespace, console: Console) -> int:
    """Print the completion code for ``args.shell`` on stdout."""
    import sys

    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(["agenthost"], shell=args.shell))
    return EXIT_OK
