"""The releases' own install manifests and the phases that apply them: shared by the
providers that install the stack with kubectl (kind) and upgrade it in place (kind,
existing)."""
