"""The exceptions that the command lines turn into a single stderr line and a non-zero exit."""


class UserError(Exception):
    """A mistake in the user's input (exit code 2): the message names the bad value and what is allowed."""


class RunFailure(Exception):
    """The run had to stop for a fault it could not go past (exit code 1); the message names where."""


def one_line(error: BaseException) -> str:
    """`KeyError: 'x'`: an error's class and the first line of its message, for a one-line report."""
    first = (str(error).splitlines() or [""])[0]
    return f"{error.__class__.__name__}: {first}" if first else error.__class__.__name__
