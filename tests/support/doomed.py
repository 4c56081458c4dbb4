"""A process that starts work on the embedded stack and is SIGKILLed by the test while a tool runs.

Usage: python -m tests.support.doomed start MESSAGE | answer REQUEST_ID  (settings from the environment).
"""

from __future__ import annotations

import sys
import time

from engine.answers.submit import submit_responses
from engine.protocol import InputResponse, api_key_principal
from engine.turns.sessions import open_session
from gateway.compose import build_runtime
from gateway.settings import Settings


def main() -> None:
    rt = build_runtime(Settings())
    alice = api_key_principal("alice")
    command, argument = sys.argv[1], sys.argv[2]
    if command == "start":
        opened = open_session(rt, alice, message=argument)
        print(opened.session_id, flush=True)
    else:
        submit_responses(rt, alice, [InputResponse(request_id=argument, option_id="approve")])
    time.sleep(600)  # the test kills this process while the tool runs


if __name__ == "__main__":
    main()
