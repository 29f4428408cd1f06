#include "utils/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <random>
#include <system_error>

#include "core/check.h"

namespace ember::utils {

namespace {

std::string reason(int error) { return std::generic_category().message(error); }

std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// "<path>.tmp-" and 16 random hex digits: O_EXCL makes a clash an error, not a shared file, and
// 64 random bits make one unlikely enough that a few retries always find a free name.
std::string temp_name(const std::string& path) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  constexpr char kHex[] = "0123456789abcdef";
  std::string name = path + ".tmp-";
  for (uint64_t bits = random(), i = 0; i < 16; ++i, bits >>= 4) name += kHex[bits & 0xF];
  return name;
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  constexpr int kAttempts = 16;
  for (int attempt = 0; attempt < kAttempts && fd_ < 0; ++attempt) {
    temp_path_ = temp_name(path_);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const int error = errno;
    temp_path_.clear();  // not ours: nothing to remove
    fail("cannot open a temporary file in '" + folder_of(path_) + "' for writing", error);
  }
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void AtomicFile::fail(const std::string& what, int error) {
  discard();
  EMBER_FAIL("[", op_, "] ", path_, ": ", what, ": ", reason(error));
}

void AtomicFile::write(const void* data, size_t bytes) {
  EMBER_CHECK(fd_ >= 0, "[", op_, "] ", path_, ": write after commit or failure");
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(fd_, next, bytes);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) {
      const int error = errno;  // before building the message, which may allocate
      fail("writing '" + temp_path_ + "' failed", error);
    }
    next += written;
    bytes -= static_cast<size_t>(written);
  }
}

void AtomicFile::commit() {
  EMBER_CHECK(fd_ >= 0, "[", op_, "] ", path_, ": commit after commit or failure");
  // Each step keeps errno before building its message, which may allocate.
  int error = ::fsync(fd_) == 0 ? 0 : errno;
  if (error) fail("cannot flush '" + temp_path_ + "' to disk", error);
  struct stat target;
  if (::stat(path_.c_str(), &target) == 0 && S_ISREG(target.st_mode)) {
    error = ::fchmod(fd_, target.st_mode & 07777) == 0 ? 0 : errno;
    if (error) fail("cannot give '" + temp_path_ + "' the permissions of the file it replaces", error);
  }
  error = ::close(fd_) == 0 ? 0 : errno;
  fd_ = -1;
  if (error) fail("closing '" + temp_path_ + "' failed", error);
  error = ::rename(temp_path_.c_str(), path_.c_str()) == 0 ? 0 : errno;
  if (error) fail("cannot rename '" + temp_path_ + "' to it", error);
  committed_ = true;

  const std::string folder = folder_of(path_);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  error = dir >= 0 ? 0 : errno;
  if (error) fail("saved, but cannot open its folder to sync the rename", error);
  // Some filesystems cannot sync a folder (EINVAL); there the rename is as durable as it gets.
  const int synced = ::fsync(dir) == 0 || errno == EINVAL ? 0 : errno;
  ::close(dir);
  if (synced != 0) fail("saved, but syncing its folder '" + folder + "' failed", synced);
}

void check_can_save(const std::string& path, const std::string& op) {
  std::error_code ec;
  EMBER_CHECK(!std::filesystem::is_directory(path, ec), "[", op, "] ", path, ": is a folder, not a file");
  AtomicFile probe(path, op);  // removed again when it goes out of scope
}

}  // namespace ember::utils
