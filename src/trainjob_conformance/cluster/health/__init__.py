"""cluster/health"""
