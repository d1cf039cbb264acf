"""Faults and fault schedules: the catalogue, schedules (explicit, seeded, Hypothesis) and the
nemesis that applies and heals them on a cluster and a workload."""
