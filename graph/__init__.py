"""The graph level (issue [2/5]): being built."""
