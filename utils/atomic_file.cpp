#include "utils/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

bool is_temp_name_of(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp-";
  if (name.size() != prefix.size() + 16 || !name.starts_with(prefix)) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Whether `fd` is still the file at `path`: a cleaner may have removed it between our open and
// our lock (Note [Stale temporary files]).
bool still_named(int fd, const std::string& path) {
  struct stat by_fd, by_name;
  return ::fstat(fd, &by_fd) == 0 && ::lstat(path.c_str(), &by_name) == 0 && by_fd.st_dev == by_name.st_dev &&
         by_fd.st_ino == by_name.st_ino;
}

}  // namespace

void remove_stale_temporaries(const std::string& path) {
  const std::string folder = folder_of(path);
  const std::string base = std::filesystem::path(path).filename().string();
  std::error_code ec;
  std::filesystem::directory_iterator it(folder, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_temp_name_of(name, base)) continue;
    const std::string candidate = it->path().string();
    const int fd = ::open(candidate.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    // A lock we can take means no live saver holds the file: its owner died (or predates locks).
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        still_named(fd, candidate))
      ::unlink(candidate.c_str());
    ::close(fd);  // releases the lock
  }
}

AtomicFile::AtomicFile(std::string path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  remove_stale_temporaries(path_);
  constexpr int kAttempts = 16;
  for (int attempt = 0; attempt < kAttempts && fd_ < 0; ++attempt) {
    temp_path_ = temp_name(path_);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
    // Held until the file is renamed or removed; a cleaner that got in first makes us retry.
    // A filesystem without locks (ENOLCK) saves unlocked, and its cleaners remove nothing.
    if (fd_ < 0) continue;
    const bool taken = ::flock(fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (taken || !still_named(fd_, temp_path_)) {
      ::close(fd_);
      fd_ = -1;
      errno = EEXIST;
    }
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
  // Renamed while still open, so its lock keeps cleaners away until it has its final name
  // (Note [Stale temporary files]).
  error = ::rename(temp_path_.c_str(), path_.c_str()) == 0 ? 0 : errno;
  if (error) fail("cannot rename '" + temp_path_ + "' to it", error);
  committed_ = true;
  error = ::close(fd_) == 0 ? 0 : errno;
  fd_ = -1;
  if (error) fail("saved, but closing it failed", error);

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
