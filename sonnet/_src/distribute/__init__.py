"""Distribution helpers: replica-local strategies and cross-replica batch norm."""
