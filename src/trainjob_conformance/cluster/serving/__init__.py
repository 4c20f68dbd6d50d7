"""cluster/serving"""
