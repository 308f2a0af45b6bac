"""Delete means delete, everywhere (issue 14, item 1)."""
