"""axjax.models: pretrained models on named axes, read from and written to Hugging Face
checkpoints (``config.json`` + ``model.safetensors``) through one declared table per
architecture (:class:`Table` of :class:`Entry` rows, :func:`load_weights`,
:func:`save_weights`): GPT-2, Llama, and Mistral and Qwen2 as variants of Llama's table; and
their tokenizers (:class:`Tokenizer`, :func:`load_tokenizer`, ``gpt2.tokenizer``,
``llama.tokenizer``, ``mistral.tokenizer``, ``qwen2.tokenizer``: ``pip install
"axjax[text]"``).

Example:
    >>> from axjax.models import gpt2
    >>> model = gpt2.from_hf("tests/models/fixtures/gpt2")
    >>> tok = gpt2.tokenizer("tests/models/fixtures/gpt2")
"""

from . import gpt2 as gpt2
from . import llama as llama
from . import mistral as mistral
from . import qwen2 as qwen2
from ._blocks import Caches as Caches
from ._cli import load_pretrained as load_pretrained
from ._hf import ConversionError as ConversionError
from ._hf import Entry as Entry
from ._hf import Table as Table
from ._hf import load_weights as load_weights
from ._hf import read_config as read_config
from ._hf import save_weights as save_weights
from ._hf import write_config as write_config
from ._peft import load_peft as load_peft
from ._peft import read_peft as read_peft
from ._peft import save_peft as save_peft
from ._peft import write_peft as write_peft
from ._text import Prompt as Prompt
from ._text import generate_text as generate_text
from ._tokenizer import Tokenizer as Tokenizer
from ._tokenizer import load_tokenizer as load_tokenizer
