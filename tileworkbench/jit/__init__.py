"""jit: lower() to an Artifact, compile() to a Kernel, the Profiler and the compile caches."""
