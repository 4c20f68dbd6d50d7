"""The one exception type a user should ever see from the harness."""


class ConformanceError(Exception):
    """An error with a message that says what went wrong and what to do.

    The CLI and the pytest plugin print only the message, never a traceback,
    so the message must stand on its own.
    """


# How every test of a run that got no cluster says so (the plugin); what a reader of
# results (layers, compat) recognizes.
CLUSTER_NOT_STARTED = "the cluster did not start"
CONTROL_PLANE_NOT_STARTED = "the control plane did not start"


def cluster_not_started(reason: str) -> str:
    return f"{CLUSTER_NOT_STARTED}: {reason}"


class ControlPlaneNotStarted(ConformanceError):
    """The cluster's own Kubernetes did not start, before any release of the stack
    was installed on it: the machine's doing (a port taken, an API server starved),
    never the releases'. `compat` leaves such a cell unjudged rather than calling
    the releases incompatible."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"{CONTROL_PLANE_NOT_STARTED}: {detail}")
