"""Backend: NVRTC compile-checks, CuPy module loading and launching, tensor maps, arguments."""
