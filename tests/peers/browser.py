"""A person's browser, for OAuth tests: open the authorization URL, press "Allow", follow
the redirect back to the client's loopback. Its own process, like a real browser: nothing
it logs (the redirect carries the code) lands in the test process's log records.

Usage: ``python tests/peers/browser.py URL`` (exit 0 once the loopback answered 200).
"""

from __future__ import annotations

import re
import sys

import httpx


def main(url: str) -> int:
    with httpx.Client(follow_redirects=True, timeout=20) as client:
        page = client.get(url)
        ticket = re.search(r"name=ticket value=([^>]+)>", page.text)
        if page.status_code != 200 or ticket is None:
            print(f"no consent page: HTTP {page.status_code}", file=sys.stderr)
            return 1
        done = client.post(
            str(page.url.copy_with(query=None)),
            data={"ticket": ticket.group(1), "decision": "allow"},
        )
        if done.status_code != 200:
            print(f"the redirect home failed: HTTP {done.status_code}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
