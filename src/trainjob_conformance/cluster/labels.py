"""Labels the harness puts on the objects it creates, shared by every provider."""

# Namespaces labelled with this key and "false" are not managed by Kueue: its
# job webhooks and reconcilers skip them, so Trainer-only policies see the
# Trainer alone. Unlabelled namespaces are managed, as in upstream's default.
KUEUE_MANAGED_LABEL = "trainjob-conformance.kubeflow.org/kueue-managed"

# The registry host of every image the harness builds itself (kind's node and the
# controllers): no registry serves it, so a node that holds such an image was loaded
# by hand and pulls nothing (an `existing` cluster the kind provider built).
LOCAL_IMAGE_HOST = "tjc.local"

# Nodes a test adds for itself carry this label and a NoSchedule taint of the same key,
# both with the test's namespace as value: no other test's Pod lands on them, and only
# a flavor that selects and tolerates them places Pods there.
TEST_NODE_LABEL = "trainjob-conformance.kubeflow.org/test-node"
