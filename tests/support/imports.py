"""What importing a module loads, in a fresh interpreter: the check that an agent's process needs none of the
gateway's server side (Flask, SQLAlchemy, the engine)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

SERVER_SIDE = {"flask", "sqlalchemy", "werkzeug", "engine", "adapters"}


def packages_loaded_by(module: str) -> set[str]:
    """The top-level packages in `sys.modules` after `import <module>` in a new Python process."""
    found = subprocess.run(
        [sys.executable, "-c", f"import json, sys, {module}; "
                               "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(found.stdout))
