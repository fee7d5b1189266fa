"""Run-time kernel choice, apart from the model maths: :func:`apply_kernel_policy` is the one entry.

- :mod:`zoo.runtime.gemm`: fp32 CPU matrix products through oneDNN or torch;
- :mod:`zoo.runtime.conv_grad`: convolution weight gradients as shifted GEMMs, timed or pinned per process;
- :mod:`zoo.runtime.convs`: convolutions fp32 under CPU bf16 autocast, and the routing of convolutions;
- :mod:`zoo.runtime.policy`: the step that routes a built model's layers (their classes stay as built).
"""
from .convs import cpu_has_bf16_kernels
from .policy import apply_kernel_policy

__all__ = ['apply_kernel_policy', 'cpu_has_bf16_kernels']
