"""What every workload shares: the seeder, the supervisor of instance processes, the downstream
observer, the final scans and the end state -- the parts that write the history around a
pipeline the harness may know nothing about."""
