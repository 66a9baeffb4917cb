"""Seeded generators of synthetic cases."""
