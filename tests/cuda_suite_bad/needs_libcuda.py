"""A compiled module that links CUDA's driver: on a machine without it, importing it fails like this."""
raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")
