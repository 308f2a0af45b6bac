"""The LLM-backed Observer and Reflector: prompts, answer parsing, degenerate-output detection."""
