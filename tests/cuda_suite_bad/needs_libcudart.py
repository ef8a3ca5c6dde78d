"""A wheel built against CUDA's runtime, imported on a machine without it."""
raise ImportError("libcudart.so.12: cannot open shared object file: No such file or directory")
