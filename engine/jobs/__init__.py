"""Jobs: the runtime and its outbox, job bodies, executors, the sweep (recovery), operator actions."""
