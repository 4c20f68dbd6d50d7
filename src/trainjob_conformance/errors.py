"""The one exception type a user should ever see from the harness."""


class ConformanceError(Exception):
    """An error with a message that says what went wrong and what to do.

    The CLI and the pytest plugin print only the message, never a traceback,
    so the message must stand on its own.
    """
