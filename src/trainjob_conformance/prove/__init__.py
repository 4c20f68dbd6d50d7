"""`prove`: show that each policy's test can fail, by breaking the cluster on purpose."""
