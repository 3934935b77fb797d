"""Operators with default schedules: conv2d, dense, element-wise, the fused layer."""
