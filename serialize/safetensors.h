#pragma once
// Note [safetensors]
// Weights are saved in Hugging Face's safetensors format, which PyTorch users can read and write
// without pickle (no code runs on load). A file is
//     8 bytes      N, the header size, as a little-endian uint64
//     N bytes      a UTF-8 JSON object: tensor name -> {"dtype": "F32", "shape": [3, 4],
//                  "data_offsets": [begin, end]}, plus an optional "__metadata__" object of
//                  string -> string; writers pad it with spaces so the data starts 8-aligned
//     the rest     the data section: each tensor's bytes, row-major and little-endian, at
//                  [begin, end) counted from the first byte after the header
// The tensors tile the data section exactly: sorted by offset, each begins where the previous
// one ends, the first at 0, the last at the end of the file. The header's key order says nothing
// about the data order (the safetensors library writes the widest dtypes first), so a reader
// goes by the offsets alone.
//
// ember writes keys in sorted order with their data in the same order, with a checksum of
// every tensor in the metadata (Note [Tensor checksums] in serialize/checksum.h), and reads F32,
// F64, BF16, F16, I64 and U8 (its dtypes). A reader must assume the file is hostile: every size and offset is
// checked against the file before anything is allocated or read, and any problem is an
// ember::Error naming the file.
#include <map>
#include <string>

#include "nn/module.h"

namespace ember::nn {

using Metadata = std::map<std::string, std::string>;

// Tensors on any device are copied to the CPU, contiguous, before writing. The file is written
// atomically (Note [Atomic saves] in utils/atomic_file.h): a failed, interrupted or concurrent
// save never leaves a truncated or mixed file at `path`.
void save_safetensors(const StateDict& state, const std::string& path, const Metadata& metadata = {});

// Which tensors must carry a checksum (Note [Tensor checksums]). IfRecorded: a file with none
// (another writer's) loads unchecked, but one that records checksums must record one for every
// tensor, so a damaged checksum key is refused rather than turning that tensor's check off.
// Required: every tensor must have one, for files only ember writes (a training checkpoint).
enum class Checksums { IfRecorded, Required };

// Reads every tensor onto the CPU, verifying the checksums the file records. When `metadata` is
// given it receives "__metadata__" less the checksum keys.
StateDict load_safetensors(const std::string& path, Metadata* metadata = nullptr,
                           Checksums checksums = Checksums::IfRecorded);

// save_safetensors(module.state_dict(), path).
void save(const Module& module, const std::string& path);
// module.load_state_dict(load_safetensors(path), strict): values are copied into the module's
// existing tensors, so parameter handles (and optimizers holding them) stay valid.
void load(Module& module, const std::string& path, bool strict = true);

}  // namespace ember::nn
