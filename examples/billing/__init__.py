"""The billing demo, `hitl serve`'s default agent: its code lives in gateway/demo.py, which the gateway ships."""

from gateway.demo import agent

__all__ = ["agent"]
