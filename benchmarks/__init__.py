"""Benchmarks: ``python -m benchmarks.<name>``; ``python -m benchmarks.run_all`` runs all."""
