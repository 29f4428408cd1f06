#pragma once
// Note [Atomic saves]
// A checkpoint is worth something only if it is whole. Writing it in place loses the old file
// the moment the new one is opened, and a crash, a full disk or a second saver halfway through
// leaves a truncated or interleaved file that fails to load. So a checkpoint writer never writes
// the target itself:
//   1. it creates a new temporary file in the target's folder (the same filesystem, so the
//      rename below is atomic), with a random name and O_CREAT | O_EXCL | O_NOFOLLOW: the file
//      is surely its own, never one another saver or an attacker put there, never a symlink;
//   2. writes everything to it and fsyncs it, so the bytes are on disk before they have a name;
//   3. gives it the target's permissions when the target exists (else those of any new file,
//      0666 less the umask);
//   4. renames it over the target: readers see the old file or the new one, never a mixture;
//   5. fsyncs the folder, so the rename itself survives a power cut.
// On any failure the temporary file is removed and an ember::Error names the target and the
// system's reason. A process killed halfway leaves at most a stray "<target>.tmp-<16 hex>" file
// beside an intact target, which the next save of the same target removes
// (Note [Stale temporary files]). Two savers of the same path each write their own temporary
// file; the later rename wins and the target is always one whole file. A symlink at the target
// is replaced by the file, not followed.
#include <cstddef>
#include <string>

namespace ember::utils {

class AtomicFile {
 public:
  // Creates the temporary file beside `path`. `op` names the caller in error messages:
  // "[op] path: what: reason".
  AtomicFile(std::string path, std::string op);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  // Steps 2-5 of Note [Atomic saves]. After it the object is spent.
  void commit();

  const std::string& temp_path() const { return temp_path_; }

 private:
  [[noreturn]] void fail(const std::string& what, int error);
  void discard() noexcept;

  std::string path_, op_, temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Note [Stale temporary files]
// A saver holds an exclusive flock on its temporary file from creation to rename; the kernel
// drops the lock when the process dies, however it dies. So before writing, a save of `path`
// removes every "<name of path>.tmp-<16 hex digits>" beside it whose lock it can take: those are
// the leftovers of killed saves of the same target, and no live saver's file (its lock is held)
// nor any other file is touched. A saver that loses the race — a cleaner removed its new file
// between its open and its lock — sees the name point elsewhere and picks another one.
void remove_stale_temporaries(const std::string& path);

// Fails fast, before hours of training, when `path` could not be saved later: creates and
// removes a temporary file beside it, raising the error a save would raise.
void check_can_save(const std::string& path, const std::string& op);

}  // namespace ember::utils
