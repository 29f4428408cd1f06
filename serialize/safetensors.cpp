#include "serialize/safetensors.h"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>
#include <vector>

#include "serialize/checksum.h"
#include "serialize/json.h"
#include "utils/atomic_file.h"

namespace ember::nn {

// Tensor bytes go to and from the file exactly as they lie in memory.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; ember needs a "
                                                          "little-endian host to read and write it");

namespace {

// The recorded form of a contiguous host tensor's checksum (Note [Tensor checksums]).
std::string checksum_of(const Tensor& t) { return checksum_hex(checksum(t.raw_data(), t.nbytes())); }

constexpr const char* kMetadataKey = "__metadata__";
constexpr size_t kSizeBytes = 8;  // the header-size prefix

struct Code {
  DType dtype;
  const char* name;
};
constexpr Code kCodes[] = {{kFloat32, "F32"}, {kFloat64, "F64"}, {kBFloat16, "BF16"},
                           {kFloat16, "F16"},   {kInt64, "I64"},   {kUInt8, "U8"}};

const char* code_of(DType dtype) {
  for (const auto& c : kCodes)
    if (c.dtype == dtype) return c.name;
  EMBER_FAIL("[safetensors] no code for dtype ", dtype);
}

std::optional<DType> dtype_of_code(const std::string& name) {
  for (const auto& c : kCodes)
    if (name == c.name) return c.dtype;
  return std::nullopt;
}

// Every error names the operation and the file.
struct Failer {
  const char* op;
  const std::string& path;
  [[noreturn]] void operator()(const std::string& what) const { EMBER_FAIL("[", op, "] ", path, ": ", what); }
};

std::string range_str(uint64_t begin, uint64_t end) { return detail::concat("[", begin, ", ", end, ")"); }

// ---------------------------------------------------------------------------------------------
// Writing

std::string header_json(const StateDict& state, const std::vector<Tensor>& hosts, const Metadata& metadata) {
  std::ostringstream out;
  out << '{';
  const char* separator = "";
  if (!metadata.empty()) {
    out << json::quote(kMetadataKey) << ":{";
    for (const auto& [key, value] : metadata) {
      out << separator << json::quote(key) << ':' << json::quote(value);
      separator = ",";
    }
    out << '}';
  }
  uint64_t offset = 0;
  auto host = hosts.begin();
  for (const auto& entry : state) {
    const Tensor& t = *host++;
    out << separator << json::quote(entry.first) << R"(:{"dtype":")" << code_of(t.dtype()) << R"(","shape":[)";
    for (size_t d = 0; d < t.shape().size(); ++d) out << (d ? "," : "") << t.shape()[d];
    out << R"(],"data_offsets":[)" << offset << ',' << offset + t.nbytes() << "]}";
    offset += t.nbytes();
    separator = ",";
  }
  out << '}';
  std::string header = out.str();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-aligned
  return header;
}

// ---------------------------------------------------------------------------------------------
// Reading

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

std::vector<int64_t> non_negative_integers(const json::Value& v, const std::string& what, const Failer& fail) {
  if (v.kind != json::Value::Kind::Array) fail(what + " must be an array, found a(n) " + json::kind_name(v.kind));
  std::vector<int64_t> out;
  for (const auto& item : v.items) {
    if (item.kind != json::Value::Kind::Integer)
      fail(what + " must hold integers, found a(n) " + json::kind_name(item.kind));
    if (item.integer < 0) fail(what + " must not be negative, found " + std::to_string(item.integer));
    out.push_back(item.integer);
  }
  return out;
}

Entry parse_entry(const std::string& name, const json::Value& v, uint64_t data_size, const Failer& fail) {
  const std::string what = "tensor '" + name + "'";
  if (v.kind != json::Value::Kind::Object) fail(what + " must be an object, found a(n) " + json::kind_name(v.kind));
  for (const auto& key : v.keys)
    if (key != "dtype" && key != "shape" && key != "data_offsets") fail(what + " has an unknown field '" + key + "'");
  auto field = [&](const char* key) -> const json::Value& {
    const json::Value* f = v.find(key);
    if (!f) fail(what + " has no '" + key + "'");
    return *f;
  };

  Entry e;
  e.name = name;
  const json::Value& dtype = field("dtype");
  if (dtype.kind != json::Value::Kind::String) fail(what + ": 'dtype' must be a string");
  const auto known = dtype_of_code(dtype.string);
  if (!known) fail(what + " has unknown dtype '" + dtype.string + "' (ember reads F32, F64, BF16, F16, I64 and U8)");
  e.dtype = *known;
  e.shape = non_negative_integers(field("shape"), what + ": 'shape'", fail);
  const auto offsets = non_negative_integers(field("data_offsets"), what + ": 'data_offsets'", fail);
  if (offsets.size() != 2) fail(what + ": 'data_offsets' must be [begin, end]");
  e.begin = static_cast<uint64_t>(offsets[0]);
  e.end = static_cast<uint64_t>(offsets[1]);
  if (e.begin > e.end) fail(what + " has data_offsets " + range_str(e.begin, e.end) + " that end before they begin");
  if (e.end > data_size)
    fail(what + " has data_offsets " + range_str(e.begin, e.end) + " past the end of the data section (" +
         std::to_string(data_size) + " bytes)");

  // The shape and its byte count are checked without overflow before anything is allocated; a
  // zero dim does not excuse huge ones (Note [Checked size arithmetic]).
  const std::optional<int64_t> numel = try_numel(e.shape);
  const std::optional<int64_t> checked_bytes =
      numel ? try_mul(*numel, static_cast<int64_t>(element_size(e.dtype))) : std::nullopt;
  if (!checked_bytes) fail(what + " has a shape " + shape_str(e.shape) + " too large to address");
  const auto bytes = static_cast<uint64_t>(*checked_bytes);
  if (bytes != e.end - e.begin)
    fail(what + " of shape " + shape_str(e.shape) + " and dtype " + dtype.string + " needs " + std::to_string(bytes) +
         " bytes, but its data_offsets " + range_str(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin));
  return e;
}

Metadata parse_metadata(const json::Value& v, const Failer& fail) {
  if (v.kind != json::Value::Kind::Object)
    fail(std::string("'") + kMetadataKey + "' must be an object, found a(n) " + json::kind_name(v.kind));
  Metadata out;
  for (size_t i = 0; i < v.keys.size(); ++i) {
    if (v.items[i].kind != json::Value::Kind::String)
      fail(std::string("'") + kMetadataKey + "' must map strings to strings, but '" + v.keys[i] + "' is a(n) " +
           json::kind_name(v.items[i].kind));
    out[v.keys[i]] = v.items[i].string;
  }
  return out;
}

// The tensors must tile the data section: no overlap, no gap, nothing left over (Note [safetensors]).
void check_tiling(std::vector<const Entry*> entries, uint64_t data_size, const Failer& fail) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry* a, const Entry* b) { return std::tie(a->begin, a->end) < std::tie(b->begin, b->end); });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : entries) {
    if (e->begin < covered)
      fail("tensor '" + e->name + "' at bytes " + range_str(e->begin, e->end) + " overlaps tensor '" + previous->name +
           "' at " + range_str(previous->begin, previous->end));
    if (e->begin > covered)
      fail("bytes " + range_str(covered, e->begin) + " of the data section belong to no tensor (the next is '" +
           e->name + "')");
    covered = e->end;
    previous = e;
  }
  if (covered != data_size)
    fail("the data section has " + std::to_string(data_size) + " bytes but the tensors cover only " +
         std::to_string(covered));
}

}  // namespace

void save_safetensors(const StateDict& state, const std::string& path, const Metadata& metadata) {
  const Failer fail{"save_safetensors", path};
  std::vector<Tensor> hosts;
  for (const auto& [name, t] : state) {
    if (name == kMetadataKey) fail(std::string("the name '") + kMetadataKey + "' is reserved for metadata");
    if (!t.defined()) fail("tensor '" + name + "' is undefined");
    hosts.push_back(t.detach().to(kCPU).contiguous());
  }
  // Note [Tensor checksums]: one per tensor, in the metadata.
  Metadata with_checksums = metadata;
  for (const auto& [key, value] : metadata)
    if (key.starts_with(kChecksumPrefix))
      fail("the metadata key '" + key + "' is reserved for ember's checksums ('" + kChecksumPrefix + "...')");
  auto host = hosts.begin();
  for (const auto& entry : state) {
    const Tensor& t = *host++;
    with_checksums[kChecksumPrefix + entry.first] = checksum_of(t);
  }
  std::string header;
  try {
    header = header_json(state, hosts, with_checksums);
  } catch (const Error& e) {  // a name that is not UTF-8 cannot go into JSON
    fail(e.message());
  }

  // Note [Atomic saves]: a failed or interrupted save leaves any previous file intact.
  utils::AtomicFile out(path, "save_safetensors");
  const auto header_size = static_cast<uint64_t>(header.size());
  char size[kSizeBytes];
  for (size_t i = 0; i < kSizeBytes; ++i) size[i] = static_cast<char>((header_size >> (8 * i)) & 0xFF);
  out.write(size, kSizeBytes);
  out.write(header.data(), header.size());
  for (const Tensor& t : hosts)
    if (t.nbytes() > 0) out.write(t.raw_data(), t.nbytes());
  out.commit();
}

StateDict load_safetensors(const std::string& path, Metadata* metadata, Checksums required) {
  const Failer fail{"load_safetensors", path};
  check_enum(required, Checksums::Required, "load_safetensors", "Checksums");
  if (metadata) metadata->clear();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) fail("cannot be examined: " + ec.message());
  if (!std::filesystem::exists(status)) fail("no such file");
  if (!std::filesystem::is_regular_file(status)) fail("not a regular file");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail("cannot read its size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open the file for reading");
  auto read = [&](void* dst, uint64_t n, const std::string& what) {
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!in) fail("the file ended while reading " + what);
  };

  if (file_size < kSizeBytes)
    fail("the file is " + std::to_string(file_size) + " bytes, too short for the 8-byte header size");
  unsigned char size[kSizeBytes];
  read(size, kSizeBytes, "the header size");
  uint64_t header_size = 0;
  for (size_t i = 0; i < kSizeBytes; ++i) header_size |= uint64_t{size[i]} << (8 * i);
  if (header_size > file_size - kSizeBytes)
    fail("the header size " + std::to_string(header_size) + " is larger than the rest of the file (" +
         std::to_string(file_size - kSizeBytes) + " bytes)");
  std::string header(header_size, '\0');
  read(header.data(), header_size, "the header");
  const uint64_t data_size = file_size - kSizeBytes - header_size;

  json::Value root;
  try {
    root = json::parse(header);
  } catch (const Error& e) {
    fail("the header is not valid JSON: " + e.message());
  }
  if (root.kind != json::Value::Kind::Object)
    fail(std::string("the header must be a JSON object, found a(n) ") + json::kind_name(root.kind));

  std::vector<Entry> entries;
  std::map<std::string, std::string> checksums;  // tensor name -> hex (Note [Tensor checksums])
  for (size_t i = 0; i < root.keys.size(); ++i) {
    if (root.keys[i] == kMetadataKey) {
      Metadata found = parse_metadata(root.items[i], fail);
      for (auto it = found.begin(); it != found.end();) {
        if (!it->first.starts_with(kChecksumPrefix)) {
          ++it;
          continue;
        }
        checksums[it->first.substr(std::string(kChecksumPrefix).size())] = it->second;
        it = found.erase(it);
      }
      if (metadata) *metadata = std::move(found);
    } else {
      entries.push_back(parse_entry(root.keys[i], root.items[i], data_size, fail));
    }
  }
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  check_tiling(by_offset, data_size, fail);
  for (const auto& checksum_entry : checksums) {
    const std::string& name = checksum_entry.first;
    if (std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; }))
      fail("the metadata holds a checksum for tensor '" + name + "', which the file does not have");
  }
  if (required == Checksums::Required || !checksums.empty())
    for (const auto& e : entries)
      if (!checksums.count(e.name))
        fail("tensor '" + e.name + "' has no checksum (no metadata key '" + kChecksumPrefix + e.name + "'), " +
             (required == Checksums::Required
                  ? std::string("and this file must record one for every tensor")
                  : std::string("while the file records them for its other tensors")) +
             ": the file is damaged or was altered");

  StateDict out;
  for (const auto& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (t.nbytes() > 0) {
      in.seekg(static_cast<std::streamoff>(kSizeBytes + header_size + e.begin));
      read(t.raw_data(), t.nbytes(), "tensor '" + e.name + "'");
    }
    if (const auto it = checksums.find(e.name); it != checksums.end()) {
      const std::string computed = checksum_of(t);
      if (computed != it->second)
        fail("tensor '" + e.name + "' fails its checksum (recorded " + it->second + ", its bytes give " + computed +
             "): the file is corrupted");
    }
    out.emplace(e.name, t);
  }
  return out;
}

void save(const Module& module, const std::string& path) { save_safetensors(module.state_dict(), path); }

void load(Module& module, const std::string& path, bool strict) {
  module.load_state_dict(load_safetensors(path), strict);
}

}  // namespace ember::nn
