"""Channels: the adapter contract, inbound items and their dedupe, delivery, contacts."""
