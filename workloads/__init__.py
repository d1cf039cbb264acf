"""Clients that drive pipelines against a cluster and record what they did."""
