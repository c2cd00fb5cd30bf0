"""slca: SLCA-GRPO (Segment-Locked Credit Assignment) for tool-calling LLM agents."""

__version__ = "0.1.0"
