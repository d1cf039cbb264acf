"""PySpark verdicts over a run's history. A checker never talks to Kafka."""
