"""cluster/embedded"""
