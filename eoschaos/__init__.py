"""eoschaos: the command line that ties clusters, workloads, chaos, checkers and reports."""
