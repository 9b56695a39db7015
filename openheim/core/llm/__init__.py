"""LLM providers: the LlmClient protocol and the wire clients (loaded lazily by kind)."""
