"""The one exception type that the command lines turn into a single stderr line and exit 2."""


class UserError(Exception):
    """A mistake in the user's input: the message names the bad value and what is allowed."""
