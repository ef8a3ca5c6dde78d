"""A folder whose conftest builds the CUDA extension its tests use: the folder is skipped."""
import cuda_ext  # noqa: F401
