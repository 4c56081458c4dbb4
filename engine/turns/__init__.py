"""Turns: the runner, turn and run transitions, calls and their policies, sessions, the lease."""
