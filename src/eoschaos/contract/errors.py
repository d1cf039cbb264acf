"""The one error type the CLI turns into a single line and exit code 2."""


class EoschaosError(Exception):
    """Bad input or a missing prerequisite: the message names the problem and the fix."""
