"""The SQLite adapter: the embedded default store."""
