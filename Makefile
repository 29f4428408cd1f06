# Thin wrapper: the build lives in CMake (CMakePresets.json).
#   make deps    install the missing Debian packages (as root; otherwise prints the apt-get line)
#   make build   configure and build (PRESET=release|debug|asan)
#   make test    build and run every test
#   make demo    build and run the example programs
PRESET ?= release
JOBS ?= $(shell nproc)

.PHONY: deps build test demo asan clean

deps:
	@scripts/install-deps

build: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	ctest --preset $(PRESET) -j $(JOBS)

demo: build
	./build/$(PRESET)/examples/autograd_basics

clean:
	rm -rf build
