# The two commands of the README. Each creates .venv on first use: `make mnist` installs
# what training needs (axjax and matplotlib for the curves), `make test` (and `install`)
# the dev extra: every extra, the checkers, the notebook and docs tools. Wheels are
# preferred (no package is built from source) and the bytecode is compiled on first import
# rather than for every file at install time.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install -q --prefer-binary --no-compile

.PHONY: mnist test test-quick lint install docs test-pythons gpu-check gpu-check-smoke onnx-check

$(VENV)/.installed-run: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_INSTALL) -e ".[plot]"
	touch $@

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_INSTALL) -e ".[dev]"
	touch $@ $(VENV)/.installed-run

install: $(VENV)/.installed

mnist: $(VENV)/.installed-run   ## train the paper's 784-300-100-10 MLP on MNIST
	$(PY) examples/mnist/train.py $(ARGS)

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# pytest-xdist workers for `make test`: one per core, at most 8 (each is a JAX process of 1-2
# GB); a test file runs whole in one worker (--dist loadfile: its module fixtures run once),
# the files in the order tests/conftest.py gives them (the costliest first, so the workers end
# together: --no-loadscope-reorder). WORKERS=0 runs the suite in one process.
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 8 ? n : 8 )))

test: lint   ## ruff, then the whole test suite (ops, typing under mypy+pyright, graph, nn, train)
	$(PY) -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder $(ARGS)

# a developer's inner loop, a few minutes: tests/core, tests/ops and tests/nn in workers, without
# the files marked slow (adding an op on a copy of the project, every layer through jax.export,
# the 70 000-value low-precision sums); `make test` runs everything
test-quick: $(VENV)/.installed
	$(PY) -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow" \
		tests/core tests/ops tests/nn $(ARGS)

docs: $(VENV)/.installed   ## the documentation site with the API reference, into site/
	$(PY) tools/gen_api_docs.py --check
	$(PY) -m mkdocs build --strict

# tests/core, tests/ops and tests/nn on Python 3.12 and 3.13 with the newest JAX each installs (one
# .venv-py3.X per version; a version that is not installed is skipped with a message)
PYTHONS ?= 3.12 3.13
test-pythons:
	bash .ci/test-pythons $(PYTHONS)

# On a GPU machine whose Python already has JAX with CUDA (no network needed, nothing
# installed but axjax itself, --no-deps): the suite's core/nn/graph/train tests, then the
# transformer, large-block and MNIST benchmarks, each under its own timeout, into $(OUT)
# (see tools/gpu_check.sh --help). gpu-check-smoke runs the same stages at CPU size.
OUT ?= gpu-check-out
gpu-check:
	OUT=$(OUT) bash tools/gpu_check.sh $(ARGS)
gpu-check-smoke:
	OUT=$(OUT) PYTHON=$(if $(wildcard $(PY)),$(PY),python3) bash tools/gpu_check.sh --smoke $(ARGS)

# ONNX export through jax2onnx, checked in its own environment (.venv-onnx): jax2onnx pins
# older flax and orbax-checkpoint than the `sharded` extra, so it is neither a base nor a dev
# dependency, and CI does not run this. tools/onnx_check.py exports an MLP, an ensemble and
# (when axjax.models.gpt2 and its fixture exist) GPT-2, and compares onnxruntime's outputs
# with axjax's within 1e-5.
ONNX_VENV ?= .venv-onnx
$(ONNX_VENV)/.installed: pyproject.toml
	python3 -m venv $(ONNX_VENV)
	$(ONNX_VENV)/bin/python -m pip install -q --upgrade pip
	$(ONNX_VENV)/bin/python -m pip install -q --prefer-binary --no-compile jax2onnx onnxruntime
	$(ONNX_VENV)/bin/python -m pip install -q --prefer-binary --no-compile -e .
	touch $@

onnx-check: $(ONNX_VENV)/.installed   ## export to ONNX (jax2onnx) and compare in onnxruntime
	$(ONNX_VENV)/bin/python tools/onnx_check.py $(ARGS)
	# docs/tensors.md with its ONNX block run, and the blocks after it (the names they use)
	AXJAX_DOCS_RUN_FRAGMENTS=jax2onnx $(ONNX_VENV)/bin/python -m tests.docs_blocks docs/tensors.md
