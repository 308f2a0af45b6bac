"""The observation text format, pure functions only: line format, dates, groups, truncation, transcript."""
