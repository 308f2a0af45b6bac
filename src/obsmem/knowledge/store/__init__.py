"""The knowledge store: its contract, row-level rules, and the memory/SQLite/PostgreSQL adapters."""
