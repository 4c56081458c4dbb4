"""The benchmark harness (`python -m bench`): throughput, end-to-end latency, storage and scale of the
gateway in its deployment shape, side by side with LangGraph + PostgresSaver and with the bare floor."""

from .cli import main, run

__all__ = ["main", "run"]
