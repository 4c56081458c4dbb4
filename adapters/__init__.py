"""Channel adapters (Slack, Twilio SMS, GitHub comments): each imports only the engine."""

__all__: list[str] = []
