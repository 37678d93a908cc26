"""Test doubles that implement the ModelAdapter contract."""
