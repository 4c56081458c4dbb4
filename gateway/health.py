"""`GET /healthz`: the database, and Redis when configured."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from sqlalchemy import text

from engine.jobs.executors import RQExecutor
from engine.jobs.runtime import Runtime

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> tuple[Response, int]:
    rt: Runtime = current_app.extensions["hitl"]
    checks: dict[str, str] = {}
    try:
        with rt.db.read() as db:
            db.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    if isinstance(rt.executor, RQExecutor):
        try:
            rt.executor.redis.ping()
            checks["redis"] = "ok"
        except Exception as exc:
            checks["redis"] = f"error: {type(exc).__name__}"
    healthy = all(v == "ok" for v in checks.values())
    return jsonify({"status": "ok" if healthy else "degraded", "checks": checks}), 200 if healthy else 503
