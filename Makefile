# Thin wrapper: the build lives in CMake (CMakePresets.json).
#   make deps    install the missing Debian packages (as root; otherwise prints the apt-get line)
#   make build   configure and build (PRESET=release|debug|asan|tsan)
#   make test    build and run every test (PRESET=tsan: the threaded tests only, docs/fuzzing.md)
#   make demo    build and train the example networks on Fashion-MNIST and a small GPT on fortunes,
#                show the GPT meeting a memory limit and training under it with --checkpoint auto
#                (examples/memory_wall.sh), and fine-tune a pretrained BERT to tell the fortunes'
#                collections apart
#   make fuzz    build the libFuzzer targets (clang) and run each for FUZZ_SECONDS (docs/fuzzing.md)
#   make docs-graphs  redraw the backward-graph pictures docs/graph_*.svg (Graphviz)
#   make exercises    build the exercise tests against your own files and run them (EXERCISE=N: one)
PRESET ?= release
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 300
EXERCISE ?=
# OpenMP threads sleep instead of spinning while they wait (Note [OpenMP wait policy]).
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: deps build test demo fuzz docs-graphs exercises clean

deps:
	@scripts/install-deps

build: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	ctest --preset $(PRESET) -j $(JOBS)

# Fashion-MNIST: the MLP for 2 epochs, then the ResNet-style network on a slice of the data; the
# GPT on a slice of the fortunes, then the memory wall (examples/memory_wall.sh: the same GPT under
# a memory limit, failing without checkpointing and training with --checkpoint auto);
# all-MiniLM-L6-v2 (scripts/install-deps) fine-tuned for its default epoch (122 steps), which is
# what it takes to beat the linear probe it prints first.
demo: build
	./build/$(PRESET)/examples/train_mlp --epochs 2
	./build/$(PRESET)/examples/train_resnet --epochs 1 --train-limit 6000
	./build/$(PRESET)/examples/train_gpt --train-limit 3000 --sample-chars 200
	examples/memory_wall.sh build/$(PRESET)
	./build/$(PRESET)/examples/finetune_text

fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)
	fuzz/run $(FUZZ_SECONDS)

# examples/graph_pictures writes the graphs as DOT (autograd::to_dot); Graphviz's dot draws them.
docs-graphs: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS) --target graph_pictures
	./build/$(PRESET)/examples/graph_pictures build/$(PRESET)
	for g in graph_mlp graph_checkpoint; do dot -Tsvg build/$(PRESET)/$$g.dot -o docs/$$g.svg || exit 1; done

# exercises/README.md: its own build folder, so the preset's build keeps testing the solutions.
exercises: deps
	cmake -S . -B build/exercises -DCMAKE_BUILD_TYPE=Release -DEMBER_EXERCISES=learner >/dev/null
	cmake --build build/exercises -j $(JOBS) --target exercises
	ctest --test-dir build/exercises -L exercises -R 'exercise$(EXERCISE)' --output-on-failure

clean:
	rm -rf build
