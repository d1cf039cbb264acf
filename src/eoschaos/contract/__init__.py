"""The contract every role shares, at the bottom of the house: the history schema and its
writer, the run directory's names, the instance environment, errors and progress output.

It imports no role (clusters, chaos, workloads, checkers, reports) and nothing above them, so
any of them may import it; `lint-imports` (pyproject.toml) keeps it that way.
"""
