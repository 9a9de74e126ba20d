"""Rate budgets: token buckets per scope and call kind (rate) and fair service of a shared budget (fair)."""
