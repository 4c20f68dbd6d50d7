"""Policy-as-code conformance harness for Kubeflow Trainer's TrainJob."""

__version__ = "0.1.0"
