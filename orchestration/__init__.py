"""Runners, executor and CLI: where engines meet the engine-agnostic components."""
