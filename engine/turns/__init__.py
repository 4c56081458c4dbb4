"""Turns: the runner (bookkeeping) and its work (the model step, the tools), turn and run transitions, calls and
their policies, sessions, the lease."""
