"""eoschaos: the command line that ties clusters, workloads, chaos, checkers and reports."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eoschaos")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
