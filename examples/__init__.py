"""Runnable agents: `HITL_AGENT=examples.<name>:agent hitl serve`; tests/test_examples.py runs each of them."""
