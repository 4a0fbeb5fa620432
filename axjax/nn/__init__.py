"""axjax.nn: layers on named axes, as Equinox modules whose fields are Tensors."""
