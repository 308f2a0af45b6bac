"""Recall: browse and search the raw messages behind observation groups (retrieval mode)."""
