"""Code generators: device CUDA C++ (cuda.py, wgmma.py) and the Python host launcher (host.py)."""
