"""``agenthost auth login|status|logout [SERVER]``: OAuth logins kept between runs.

``login`` runs the server's flow now (a browser for the authorization-code grant; none for
client credentials or the enterprise grant) and saves the result in the token store;
``status`` shows what is saved (never a token); ``logout`` forgets it. Failures are
:class:`~agenthost.errors.AuthorizationError` (exit 5), one line naming the server.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from agenthost.cli.common import add_command, load_config
from agenthost.cli.exit import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CLIError
from agenthost.cli.render import Console, print_json, say

if TYPE_CHECKING:
    from agenthost.auth.flow import OAuth, OAuthStatus
    from agenthost.config.model import ServerConfig

__all__ = ["add_parser", "run"]

_HTTP_KINDS = ("http", "streamable-http", "sse")


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``auth`` on the CLI's subparsers."""
    text = "log in to a remote server with OAuth, show or forget saved logins"
    auth = add_command(sub, common, "auth", text)
    auth.add_argument(
        "action", choices=("login", "status", "logout"), help="log in, show, or forget logins"
    )
    auth.add_argument("server", nargs="?", help="the server (status: default all remote ones)")
    auth.add_argument(
        "--no-browser", action="store_true", help="print the login URL, do not open a browser"
    )


def _oauth_servers(config: Any, name: str | None) -> list[ServerConfig]:
    servers = [s for s in config.servers if s.transport in _HTTP_KINDS]
    if name is not None:
        servers = [s for s in servers if s.name == name]
        if not servers:
            raise CLIError(
                f"{name!r} is not a remote HTTP server in the config (OAuth is for those)",
                EXIT_USAGE,
            )
    return servers


def _describe(status: OAuthStatus) -> str:
    if not status.logged_in:
        return f"{status.server}: not logged in"
    parts = [f"{status.server}: logged in with {status.issuer}"]
    if status.scopes:
        parts.append(f"scopes {' '.join(status.scopes)}")
    if status.expires_at is not None:
        left = status.expires_at - time.time()
        parts.append(f"token expires in {left:.0f} s" if left > 0 else "token expired")
    parts.append("refreshable" if status.refreshable else "not refreshable")
    return ", ".join(parts)


def _json(status: OAuthStatus) -> dict[str, Any]:
    return {
        "server": status.server,
        "logged_in": status.logged_in,
        "issuer": status.issuer,
        "scopes": list(status.scopes),
        "expires_at": status.expires_at,
        "refreshable": status.refreshable,
        "client": status.client,
    }


async def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``auth login|status|logout``."""
    import httpx
    import trio

    from agenthost.auth.flow import OAuth
    from agenthost.auth.loopback import terminal_opener

    if args.action != "status" and args.server is None:
        raise CLIError(f"auth {args.action} needs a SERVER", EXIT_USAGE)
    config = load_config(args)
    servers = _oauth_servers(config, args.server)
    results: list[OAuthStatus] = []
    from agenthost.transports._httpx import ssl_context

    # The transports' SSL context: a login trusts exactly what the calls after it trust.
    timeout = httpx.Timeout(10.0, read=30.0)
    async with httpx.AsyncClient(timeout=timeout, verify=ssl_context()) as http:
        for server in servers:
            assert server.url is not None
            if server.oauth is not None and not server.oauth.enabled:
                raise CLIError(f"OAuth is off for {server.name} (oauth = false)", EXIT_USAGE)
            opener = None
            if args.action == "login":
                open_browser = not args.no_browser and (
                    server.oauth is None or server.oauth.open_browser
                )
                opener = terminal_opener(open_browser=open_browser)
            oauth: OAuth = OAuth(
                server=server.name,
                url=server.url,
                settings=server.oauth,
                http=http,
                opener=opener,
            )
            if args.action == "login":
                # A safety net only: the flow bounds each exchange (exchange_timeout) and
                # the browser (login_timeout) itself.
                settings = oauth.settings
                limit = settings.login_timeout + 2 * settings.exchange_timeout + 30.0
                with trio.move_on_after(limit) as scope:
                    results.append(await oauth.login())
                if scope.cancelled_caught:
                    raise CLIError(
                        f"{server.name}: authorization failed: the login took over {limit:g} s",
                        EXIT_UNAVAILABLE,
                    )
                if not args.json:
                    console.quiet = False
                    say(_describe(results[-1]))
            elif args.action == "logout":
                removed = await oauth.logout()
                results.append(await oauth.status())
                if not args.json:
                    say(f"{server.name}: " + ("logged out" if removed else "was not logged in"))
            else:
                results.append(await oauth.status())
                if not args.json:
                    say(_describe(results[-1]))
    if args.json:
        print_json([_json(status) for status in results])
    return EXIT_OK
