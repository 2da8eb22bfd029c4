"""Evaluation of single-agent and multi-agent systems over datasets."""
