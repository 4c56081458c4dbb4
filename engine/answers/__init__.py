"""Answers: input requests, reply matching, submit -> judge -> settle, the conversation rules, time."""
