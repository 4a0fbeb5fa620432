"""axjax.train: losses, metrics, the optax training loop, checkpoints and data."""
