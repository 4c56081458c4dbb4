"""The `hitl` command: serve, worker, slack-socket, mcp and db upgrade here; the operator's commands (requests,
answer, sessions, show, resume, sweep) in `cli_operator`, people and groups in `cli_people`."""

from __future__ import annotations

import argparse
import errno
import logging
import socket
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy.exc import OperationalError
from werkzeug.serving import WSGIRequestHandler, make_server

from engine.errors import EngineError
from engine.jobs.recovery import Sweeper

from .cli_operator import add_operator_commands
from .cli_people import add_people_commands
from .compose import build_runtime, open_database
from .settings import ConfigurationError, describe, described, load_settings
from .stream import redact_access_token

log = logging.getLogger("hitl")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="hitl", description="hitl-gateway: agent turns that wait for people",
                                     epilog=configuration(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('hitl-gateway')}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the gateway (embedded defaults: SQLite, in-process jobs)",
                                description="Serve the console, the REST API and the channels' webhooks.")
    serve.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0: all of them)")
    serve.add_argument("--port", type=int, default=8000,
                       help="the port to listen on (default: 8000; 0: a free one, named in the start line)")
    serve.set_defaults(handler=cmd_serve)

    commands.add_parser("worker", help="run an RQ worker (needs REDIS_URL); sweeps every HITL_SWEEP_SECONDS") \
        .set_defaults(handler=cmd_worker)

    commands.add_parser("slack-socket", help="take Slack's events over Socket Mode (SLACK_APP_TOKEN): no public URL") \
        .set_defaults(handler=cmd_slack_socket)

    db = commands.add_parser("db", help="database schema")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    db_commands.add_parser("upgrade", help="apply migrations up to head").set_defaults(handler=cmd_db_upgrade)
    add_operator_commands(commands)
    add_people_commands(commands)

    commands.add_parser("mcp", help="serve the ask_human and request_approval tools to an MCP client over stdio "
                                    "(HITL_URL, HITL_API_KEY)",
                        description="A Model Context Protocol server on stdin and stdout whose tools ask people "
                                    "through the gateway at HITL_URL with the key HITL_API_KEY (an agent's). "
                                    "Needs hitl-gateway[mcp].").set_defaults(handler=cmd_mcp)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        args.handler(args)
    except (ConfigurationError, EngineError) as exc:
        sys.exit(f"hitl: {exc}")
    except OperationalError as exc:  # down, unreachable, refused us, or a SQLite file that cannot be opened
        sys.exit(f"hitl: the database of DATABASE_URL cannot be used: {str(exc.orig).strip().splitlines()[0]}")
    except RedisError as exc:  # hitl worker: down, unreachable, or refused us (its message names host and port only)
        sys.exit(f"hitl: the Redis of REDIS_URL cannot be used: {str(exc).strip().splitlines()[0]}")


def configuration() -> str:
    """What `hitl --help` ends with: the database, agent and job mode this shell's settings give."""
    try:
        settings = described(load_settings())
    except ConfigurationError as exc:
        return f"here, the settings are not usable: {exc}"
    return "here (from the environment, and .env in this directory):\n" + "\n".join(
        f"  {what:10}{value}" for what, value in settings.items())


class ServeRequestHandler(WSGIRequestHandler):
    """Werkzeug's, logging each request line with an event stream's `?access_token=` key hidden."""

    def log(self, type: str, message: str, *args: Any) -> None:
        super().log(type, message, *(redact_access_token(arg) if isinstance(arg, str) else arg for arg in args))


def cmd_serve(args: argparse.Namespace) -> None:
    """Start only on a database that can be used (a web process of the Procfile starts anyway, for its health
    check), and say so once the port is bound."""
    from .app import create_app

    settings = load_settings()
    app = create_app(settings, build_runtime(settings, db=open_database(settings, strict=True)))
    bound = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:  # bound here: werkzeug's own binding prints its failure and exits
        bound.bind((args.host, args.port))
        bound.listen(128)
    except OSError as exc:
        hint = " (another `hitl serve`? --port picks another)" if exc.errno == errno.EADDRINUSE else ""
        raise ConfigurationError(f"cannot listen on {args.host} port {args.port}: {exc.strerror or exc}{hint}") \
            from None
    server = make_server(args.host, args.port, app, threaded=True, request_handler=ServeRequestHandler,
                         fd=bound.fileno())
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"hitl-gateway serving http://{host}:{bound.getsockname()[1]} ({describe(settings)})", flush=True)
    try:
        server.serve_forever()
    finally:
        bound.close()


def cmd_worker(args: argparse.Namespace) -> None:
    from rq import Queue

    from .rqworker import WORKER_CLASSES

    settings = load_settings()
    if not settings.redis_url:
        raise ConfigurationError("hitl worker needs REDIS_URL")
    rt = build_runtime(settings)
    import psycopg  # noqa: F401  (preloaded so forked work horses do not import it per job)

    import engine.jobs.perform  # noqa: F401

    Sweeper(rt, settings.sweep_seconds).start()
    executor = rt.executor
    worker_class = WORKER_CLASSES[settings.worker_class]
    connection = executor.redis  # type: ignore[attr-defined]
    worker = worker_class([Queue(settings.queue, connection=connection)], connection=connection)
    worker.work(with_scheduler=True)


def cmd_slack_socket(args: argparse.Namespace) -> None:
    from .app import create_app
    from .slack import socket_mode_handler

    socket_mode_handler(create_app()).start()


def cmd_mcp(args: argparse.Namespace) -> None:
    """The MCP SDK is an extra: without it, say which to install."""
    try:
        from .mcp_server import build_server
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise ConfigurationError("hitl mcp needs the MCP SDK: install hitl-gateway[mcp]") from None
    try:
        server = build_server()
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    server.run("stdio")


def cmd_db_upgrade(args: argparse.Namespace) -> None:
    settings = load_settings()
    from engine.store.db import Database

    db = Database(settings.database_url)
    newer = db.newer_revision()
    if newer is not None:  # a rollback's release: the processes of this version use it as it is
        print(f"database is at revision {newer}, of a newer version than this one: left as it is")
        return
    db.upgrade()
    print("database is at the latest revision")
