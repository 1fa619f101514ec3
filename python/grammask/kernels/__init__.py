"""Kernels that apply a token bitmask to logits, one module per backend, with the module and
function names of ``xgrammar.kernels`` (XGrammar 0.2.8):

- ``apply_token_bitmask_inplace_cpu.apply_token_bitmask_inplace_cpu``: CPU torch tensors and numpy
  arrays.
- ``apply_token_bitmask_inplace_torch.apply_token_bitmask_inplace_torch``: plain torch operations,
  any device (XGrammar's "torch_native" backend).
- ``apply_token_bitmask_inplace_torch_compile.apply_token_bitmask_inplace_torch_compile``: the same
  operations under ``torch.compile(dynamic=True)``.
- ``apply_token_bitmask_inplace_triton.apply_token_bitmask_inplace_triton``: a Triton kernel for
  CUDA/ROCm tensors.
- ``apply_token_bitmask_inplace_cuda.apply_token_bitmask_inplace_cuda``: CUDA tensors (grammask
  ships no ``.cu`` source and needs no nvcc: this runs the torch operations on the GPU).
- ``apply_token_bitmask_mlx.apply_token_bitmask_mlx``: MLX arrays (returns new logits).

Importing any of these modules never fails: torch, Triton and MLX are imported when a kernel is
called, and a kernel whose library or device is missing raises
:class:`~grammask.UnsupportedFeatureError` saying what is missing. ``import grammask`` imports none
of them.
"""

__all__: list = []
