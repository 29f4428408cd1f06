#pragma once
// Reader for the golden files written by tests/fixtures/make_fixtures.py. A file is a list of
// blocks
//     tensor <name> <float32|float64|int64> <ndim> <d0> <d1> ...
//     <numel values, row-major, separated by whitespace>
// and lines starting with '#' are comments. Fixture::load() parses a whole file; get() returns a
// tensor by name. Any problem (missing file, bad header, too few values, unknown name) throws
// std::runtime_error naming the file, so a test that uses it fails with a readable message.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

#ifndef EMBER_FIXTURES_DIR
#error "EMBER_FIXTURES_DIR must be defined (tests/CMakeLists.txt does it)"
#endif

namespace ember::testutil {

// The folder of the golden files: $EMBER_FIXTURES_DIR where set (scripts/gpu-check sets it to the
// GPU bundle's copy, since the bundle runs far from the source tree), else tests/fixtures.
inline std::string fixtures_dir() {
  const char* dir = std::getenv("EMBER_FIXTURES_DIR");
  return dir ? dir : EMBER_FIXTURES_DIR;
}

class Fixture {
 public:
  // `file` is relative to tests/fixtures, e.g. "parity_mlp.txt".
  static Fixture load(const std::string& file) {
    Fixture f;
    f.path_ = fixtures_dir() + "/" + file;
    std::ifstream in(f.path_);
    if (!in)
      throw std::runtime_error("fixture file " + f.path_ +
                               " cannot be opened (regenerate with: /usr/bin/python3 tests/fixtures/make_fixtures.py)");
    std::string line;
    int line_no = 0;
    auto fail = [&](const std::string& what) {
      throw std::runtime_error(f.path_ + ":" + std::to_string(line_no) + ": " + what);
    };
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream header(line);
      std::string kw, name, dtype;
      int64_t ndim = -1;
      header >> kw >> name >> dtype >> ndim;
      if (!header || kw != "tensor" || ndim < 0) fail("expected 'tensor <name> <dtype> <ndim> <dims...>', got '" + line + "'");
      Shape shape(static_cast<size_t>(ndim));
      for (auto& d : shape)
        if (!(header >> d) || d < 0) fail("bad dims in '" + line + "'");
      if (f.tensors_.count(name)) fail("tensor '" + name + "' appears twice");

      if (!std::getline(in, line)) fail("missing values of tensor '" + name + "'");
      ++line_no;
      const int64_t n = numel_of(shape);
      std::vector<std::string> words;
      {
        std::istringstream vs(line);
        std::string w;
        while (vs >> w) words.push_back(w);
      }
      if (static_cast<int64_t>(words.size()) != n)
        fail("tensor '" + name + "' of shape " + shape_str(shape) + " needs " + std::to_string(n) + " values, found " +
             std::to_string(words.size()));
      Tensor t;
      if (dtype == "float32") {
        t = parse<float>(words, shape, kFloat32, name, fail);
      } else if (dtype == "float64") {
        t = parse<double>(words, shape, kFloat64, name, fail);
      } else if (dtype == "int64") {
        t = parse<int64_t>(words, shape, kInt64, name, fail);
      } else {
        fail("tensor '" + name + "' has unsupported dtype '" + dtype + "'");
      }
      f.tensors_.emplace(name, t);
      f.order_.push_back(name);
    }
    return f;
  }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }

  // A fresh tensor (its own storage, no autograd history), so a test may requires_grad_() it.
  Tensor get(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      std::string names;
      for (const auto& n : order_) names += (names.empty() ? "" : ", ") + n;
      throw std::runtime_error("fixture " + path_ + " has no tensor '" + name + "' (it has: " + names + ")");
    }
    return it->second.clone();
  }

  const std::string& path() const { return path_; }
  const std::vector<std::string>& names() const { return order_; }

 private:
  template <class T, class Fail>
  static Tensor parse(const std::vector<std::string>& words, const Shape& shape, DType dtype, const std::string& name,
                      Fail& fail) {
    std::vector<T> values;
    values.reserve(words.size());
    for (const auto& w : words) {
      char* end = nullptr;
      T v;
      if constexpr (std::is_same_v<T, float>) v = std::strtof(w.c_str(), &end);
      else if constexpr (std::is_same_v<T, double>) v = std::strtod(w.c_str(), &end);
      else v = static_cast<T>(std::strtoll(w.c_str(), &end, 10));
      if (end == w.c_str() || *end != '\0') fail("tensor '" + name + "': cannot parse value '" + w + "'");
      values.push_back(v);
    }
    return from_buffer(values.data(), shape, dtype, dtype);
  }

  std::string path_;
  std::map<std::string, Tensor> tensors_;
  std::vector<std::string> order_;
};

// The fixture's tensor as a leaf that requires grad: an input whose gradients the file holds.
inline Tensor fixture_leaf(const Fixture& f, const std::string& name) { return f.get(name).requires_grad_(); }
// A 0/1 mask: the fixtures store masks as int64, ember's are uint8.
inline Tensor fixture_mask(const Fixture& f, const std::string& name) { return f.get(name).to(kUInt8); }

}  // namespace ember::testutil
