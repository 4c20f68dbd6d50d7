"""cluster/isolation"""
