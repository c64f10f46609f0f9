"""The KV-Rescue paper's reported figures (Tables 1, 2, 3, 5) as CSV: README.md beside this file."""
