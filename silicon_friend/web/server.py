"""Serving the web app safely: loopback by default, no share link unless asked, optional login,
no analytics."""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memory_bank.errors import InvalidInputError
from memory_bank.text import validate_user
from silicon_friend.engine import SiliconFriend
from silicon_friend.errors import SiliconFriendError

logger = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_credential(text: str, where: str = "--auth") -> tuple[str, str]:
    """``user:password`` as a pair (the password may contain ``:``)."""
    user, sep, password = text.strip().partition(":")
    if not sep or not user or not password:
        raise InvalidInputError(f"{where}: expected user:password, got {text.strip()[:40]!r}")
    return validate_user(user), password


def load_credentials(pairs: Iterable[str] = (), auth_file: str | Path | None = None) -> list[tuple[str, str]]:
    """Credentials from ``--auth user:pass`` values and an ``--auth-file`` (one ``user:pass`` a
    line; blank lines and ``#`` comments skipped). Duplicate user names are an error."""
    creds = [parse_credential(p) for p in pairs]
    if auth_file is not None:
        path = Path(auth_file).expanduser()
        if not path.is_file():
            raise InvalidInputError(f"--auth-file {str(path)!r} does not exist")
        if os.name == "posix" and path.stat().st_mode & 0o044:
            logger.warning("%s is readable by other users; chmod 600 it", path)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                creds.append(parse_credential(line, f"{path}:{number}"))
    names = [u for u, _ in creds]
    dupes = sorted({u for u in names if names.count(u) > 1})
    if dupes:
        raise InvalidInputError(f"user {dupes[0]!r} is given more than one password")
    return creds


def serve(
    engine: SiliconFriend,
    *,
    host: str = "127.0.0.1",
    port: int = 7860,
    share: bool = False,
    credentials: list[tuple[str, str]] | None = None,
    concurrency: int = 4,
    allowed_hosts: Iterable[str] = (),
    block: bool = True,
) -> Any:
    """Build and launch the app; returns the Blocks (already running when ``block=False``).

    Requests pass :class:`~silicon_friend.web.guard.RequestGuard` first (Host allow-list for
    ``host`` plus ``allowed_hosts``, same-origin state changes, session hashes bound to their
    login, a strict Content-Security-Policy), then the export downloads route.
    """
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    from starlette.middleware import Middleware

    from silicon_friend.web.app import WebApp
    from silicon_friend.web.downloads import DownloadRoute
    from silicon_friend.web.guard import RequestGuard, host_policy

    if host not in LOOPBACK and not credentials:
        logger.warning(
            "serving on %s without a login: anyone who can reach it can read any user's memories", host
        )
    if share:
        logger.warning("--share: Gradio opens a public link to this app")
    web = WebApp(engine, auth=bool(credentials), concurrency=concurrency)
    web.start_warm_up()  # the encoder loads while the page opens, not in the first "Remember Me"
    demo = web.build()
    demo.queue(default_concurrency_limit=16)
    policy = host_policy(host, allowed_hosts, share=share)
    middleware = [
        Middleware(RequestGuard, policy=policy),  # type: ignore[arg-type]
        Middleware(DownloadRoute, store=web.downloads),  # type: ignore[arg-type]
    ]
    _check_listen(host, port)  # Gradio says "cannot find an empty port" for any bind failure
    try:
        demo.launch(
            app_kwargs={"middleware": middleware},
            theme=web.theme(),
            css=web.css,
            js=web.js,
            server_name=host,
            server_port=port,
            share=share,
            auth=credentials or None,
            auth_message="SiliconFriend: sign in to open your memories." if credentials else None,
            prevent_thread_lock=True,
            # Gradio keeps every call's inputs and outputs (messages, replies, names, a temporary
            # chat's) in the browser's storage for its "Runs" page, where they outlived "Forget me":
            # off, which also deletes what an earlier version of the app left there.
            run_history=False,
            show_error=True,
            ssr_mode=False,
            quiet=True,
        )
    except OSError as e:  # taken meanwhile; Gradio's advice names its own variables, not --port
        if "port" not in str(e).lower():
            raise
        raise _port_in_use(host, port) from e
    display = f"[{host}]" if ":" in host else host
    print(f"SiliconFriend is running at http://{display}:{demo.server_port}", flush=True)
    if block:
        try:
            demo.block_thread()  # until Ctrl-C; the caller closes the engine and the bank
        finally:
            web.finish()  # replies being made or waiting are stored first
    return demo


def _port_in_use(host: str, port: int) -> SiliconFriendError:
    return SiliconFriendError(
        f"port {port} on {host} is in use (another app, or SiliconFriend already running); "
        "stop it or give another --port"
    )


def _check_listen(host: str, port: int) -> None:
    """Refuse, naming the option to change, a --host this machine cannot listen on (a name
    that does not resolve, another machine's address) and a --port already taken."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise SiliconFriendError(
            f"--host {host!r} is not a name or address this machine can resolve ({e.strerror}); "
            "give 127.0.0.1 or an address of this machine"
        ) from e
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise _port_in_use(host, port) from e
            raise SiliconFriendError(
                f"cannot listen on --host {host!r} ({e.strerror}): give 127.0.0.1 or an address of "
                "this machine"
            ) from e
