"""The dashboard: a live page for every run and every stage, and Prometheus metrics."""
