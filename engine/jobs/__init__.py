"""Jobs: the runtime, the transactional outbox, job bodies, executors, the sweep (recovery), operator actions."""
