"""The exceptions that the command lines turn into a single stderr line and a non-zero exit."""


class UserError(Exception):
    """A mistake in the user's input (exit code 2): the message names the bad value and what is allowed."""


class RunFailure(Exception):
    """The run had to stop for a fault it could not go past (exit code 1); the message names where."""
