"""Renderers: one per report, reading reports and never reaching into analyses."""
