"""Binds transformers: model loading, the token-level policy, its rows, and the evicting cache and attention."""
