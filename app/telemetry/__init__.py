"""Every Prometheus metric in one module, and the tracing setup and propagation helpers."""
