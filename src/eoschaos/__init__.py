"""eoschaos: Jepsen-style chaos verification of exactly-once Kafka pipelines.

The roles live in subpackages (`eoschaos.clusters`, `.chaos`, `.workloads`, `.checkers`,
`.reports`) over the shared contract (`eoschaos.contract`); the command line, the run driver
and the pytest plugin sit on top of them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eoschaos")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
