"""Compiler passes: one module per pass; pipeline.py is the ordered list, manager.py runs it."""
