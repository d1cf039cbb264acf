"""The nemesis: faults and fault schedules (filled in by the nemesis issue)."""
