"""Test doubles that implement the adapter contract (model_api.py)."""
