"""Graph passes, one per file, each a pure function ``(graph, ...) -> graph``."""
