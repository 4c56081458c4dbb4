"""hitl-gateway engine: durable agent turns that park on people. Platform-free."""

from engine.agent import Agent, Answer, Approval, Tool, ToolContext, tool
from engine.answers.questions import ask_question
from engine.errors import EngineError, InvalidInput, NotFound, RequestClosed
from engine.llm import AnthropicModel, ModelReply, OpenAIChatModel, ScriptedModel, ToolCallRequest
from engine.people import Person
from engine.policies import (
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
from engine.protocol import InputResponse, Principal

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
    "Person",
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
