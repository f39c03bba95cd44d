"""Reports computed from result records alone (pandas, imported lazily by callers)."""
