// A CUDA extension's source: never compiled under --tt-cuda (building it is refused).
__global__ void scale_kernel(float* x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}
