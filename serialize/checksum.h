#pragma once
// Note [Tensor checksums]
// safetensors has no integrity check of its own: a flipped bit in a tensor's bytes loads as a
// plausible weight, and a resumed run trains on from it. So ember's writer records, for every
// tensor, a 64-bit XXH3 hash of its bytes in the file's metadata ("__metadata__"), under the key
// kChecksumPrefix + the tensor's name, as 16 hex digits. Readers that do not know the keys (the
// safetensors library, PyTorch) see a few extra strings and load the file as before. ember's
// reader recomputes the hash of every tensor that has one and refuses the file, naming the
// tensor, when they differ; files without checksums (another writer's) load unchecked. XXH3 runs
// at memory speed (bench/bench_checksum.cpp measures a 100 MB file), so the check costs about
// what reading the bytes costs. It detects corruption, not tampering: anyone can recompute it.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::nn {

inline constexpr const char* kChecksumPrefix = "ember.xxh3_64.";

// XXH3 64-bit, seed 0 (libxxhash, Debian's libxxhash-dev, used header-only).
uint64_t checksum(const void* data, size_t bytes);
std::string checksum_hex(uint64_t value);  // 16 lowercase hex digits

}  // namespace ember::nn
