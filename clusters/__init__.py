"""Kafka nodes behind Toxiproxy and their lifecycle (Jepsen's "db" role)."""
