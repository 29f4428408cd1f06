#include "examples/char_text.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/check.h"
#include "core/ops.h"

namespace ember::examples {

namespace fs = std::filesystem;

std::string read_fortunes(const std::string& dir) {
  std::error_code error;
  EMBER_CHECK(fs::is_directory(dir, error), "[read_fortunes] '", dir,
              "' is not a directory (install Debian's fortunes package, or pass the folder with --data)");
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_symlink() && entry.is_regular_file() && !name.ends_with(".dat") && !name.ends_with(".u8"))
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& name : names) {
    std::ifstream in(fs::path(dir) / name, std::ios::binary);
    EMBER_CHECK(in, "[read_fortunes] cannot read '", (fs::path(dir) / name).string(), "'");
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EMBER_CHECK(!text.empty(), "[read_fortunes] '", dir, "' holds no fortune files (plain files without .dat or .u8)");
  return text;
}

CharVocab::CharVocab(std::string_view text) : id_of_(256, -1) {
  for (unsigned char c : text) id_of_[c] = 0;
  for (int byte = 0; byte < 256; ++byte)
    if (id_of_[static_cast<size_t>(byte)] == 0) {
      id_of_[static_cast<size_t>(byte)] = static_cast<int64_t>(chars_.size());
      chars_.push_back(static_cast<char>(byte));
    }
  EMBER_CHECK(!chars_.empty(), "[CharVocab] the text is empty");
}

Tensor CharVocab::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int64_t id = id_of_[static_cast<unsigned char>(text[i])];
    EMBER_CHECK(id >= 0, "[CharVocab] byte ", static_cast<int>(static_cast<unsigned char>(text[i])), " at offset ",
                i, " does not occur in the vocabulary's text");
    ids.push_back(id);
  }
  return from_vector<int64_t>(ids, {static_cast<int64_t>(ids.size())}, TensorOptions(kInt64));
}

std::string CharVocab::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    EMBER_CHECK(id >= 0 && id < size(), "[CharVocab] id ", id, " is out of range for ", size(), " characters");
    out.push_back(chars_[static_cast<size_t>(id)]);
  }
  return out;
}

std::shared_ptr<data::TensorDataset> next_token_windows(const Tensor& ids, int64_t context) {
  EMBER_CHECK(ids.dim() == 1 && ids.dtype() == kInt64, "[next_token_windows] expects int64 ids [n], got ", ids.dtype(),
              " ", shape_str(ids.shape()));
  EMBER_CHECK(context >= 1, "[next_token_windows] context must be at least 1, got ", context);
  const int64_t windows = (ids.size(0) - 1) / context;
  EMBER_CHECK(windows >= 1, "[next_token_windows] ", ids.size(0), " tokens make no window of ", context,
              " tokens and its next token");
  const int64_t used = windows * context;
  Tensor inputs = ids.narrow(0, 0, used).reshape({windows, context}).contiguous();
  Tensor targets = ids.narrow(0, 1, used).reshape({windows, context}).contiguous();
  return std::make_shared<data::TensorDataset>(inputs, targets);
}

}  // namespace ember::examples
