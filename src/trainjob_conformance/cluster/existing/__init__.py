"""cluster/existing"""
