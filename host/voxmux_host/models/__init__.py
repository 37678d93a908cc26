"""Model adapters that run real models (see registry.py for the names they are served under)."""
