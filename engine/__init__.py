"""hitl-gateway engine: durable agent turns that park on people. Platform-free."""

from .agent import Agent, Answer, Approval, Tool, ToolContext, tool
from .errors import EngineError, InvalidInput, NotFound, RequestClosed
from .llm import AnthropicModel, ModelReply, OpenAIChatModel, ScriptedModel, ToolCallRequest
from .policies import (
    ApprovalContext,
    ApprovalPolicy,
    ResponseContext,
    ResponseInfo,
    always,
    approvers,
    auto,
    never,
    once,
    requester_only,
)
from .protocol import InputResponse, Principal
from .questions import ask_question

__all__ = [
    "Agent",
    "AnthropicModel",
    "Answer",
    "Approval",
    "ApprovalContext",
    "ApprovalPolicy",
    "EngineError",
    "InputResponse",
    "InvalidInput",
    "ModelReply",
    "NotFound",
    "OpenAIChatModel",
    "Principal",
    "RequestClosed",
    "ResponseContext",
    "ResponseInfo",
    "ScriptedModel",
    "Tool",
    "ToolCallRequest",
    "ToolContext",
    "always",
    "approvers",
    "ask_question",
    "auto",
    "never",
    "once",
    "requester_only",
    "tool",
]
