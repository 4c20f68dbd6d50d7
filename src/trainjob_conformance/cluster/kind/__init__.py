"""cluster/kind"""
