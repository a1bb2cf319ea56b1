"""backend_cpu."""
