"""Side-by-side benchmarks: axjax against hand-written JAX, Equinox, Haliax and PyTorch.

One command runs every model in every framework that is installed, interleaved in one
process, from the same initial weights and on the same batches::

    .venv/bin/python -m benchmarks            # the full run (see BENCHMARKS.md)
    .venv/bin/python -m benchmarks --quick    # a smoke run: a few steps of each

Models (``benchmarks/models``): the paper's MNIST MLP 784-300-100-10, a LeNet-style CNN,
an LSTM over the image rows, and a transformer-style attention block over the rows. Each
is written once per framework: hand-written JAX + optax (the reference), axjax modules
under ``jax.jit``, the axjax graph (``ax.compile_step``), Equinox, and Haliax and
PyTorch when they can be imported.
"""
