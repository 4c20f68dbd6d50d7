"""Policy-as-code conformance harness for Kubeflow Trainer's TrainJob."""

from importlib import metadata

try:
    __version__ = metadata.version("trainjob-conformance")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.0.0+unknown"
