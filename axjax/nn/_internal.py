"""What the train and models packages use of nn beyond its public names; not user API."""

from ._lora import lora_record as lora_record
from ._select import Selection as Selection
from ._select import leaves_with_paths as leaves_with_paths
from ._select import selector as selector
from ._stack import scan_layers as scan_layers
