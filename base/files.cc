#include "base/files.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace seqbench {
namespace fs = std::filesystem;
namespace {

FileSystemError WriteError(const std::string& path, const std::string& step, int error) {
  return FileSystemError("cannot write " + path + ": " + step + ": " + std::strerror(error));
}

// Removes the temporary unless Keep() was called: every early exit leaves nothing behind.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {}
  ~TemporaryFile() {
    if (fd_ >= 0) close(fd_);
    if (!kept_) unlink(path_.c_str());
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  void set_fd(int fd) { fd_ = fd; }
  int fd() const { return fd_; }
  // Closes the descriptor, reporting what close() says (NFS reports write errors there).
  int Close() {
    const int result = close(fd_);
    fd_ = -1;
    return result;
  }
  void Keep() { kept_ = true; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool kept_ = false;
};

// The target's permission bits if it is a regular file, 0644 if it does not exist; throws
// OutputRefused for a symlink or anything else.
mode_t TargetMode(const std::string& path) {
  struct stat status {};
  if (lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return 0644;
    throw WriteError(path, "cannot inspect it", errno);
  }
  if (S_ISLNK(status.st_mode)) {
    throw OutputRefused(path +
                        " is a symbolic link: seqbench replaces only regular files "
                        "(write to the file it points to, or remove the link)");
  }
  if (!S_ISREG(status.st_mode)) throw OutputRefused(path + " exists and is not a regular file");
  return status.st_mode & 07777;
}

void WriteAll(const TemporaryFile& file, const std::string& target, const std::string& content) {
  for (size_t written = 0; written < content.size();) {
    const ssize_t n = write(file.fd(), content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw WriteError(target, "writing", errno);
    written += static_cast<size_t>(n);
  }
}

// Makes the rename itself durable: without it a crash may bring the old file back.
void SyncDirectory(const fs::path& directory) {
  const int fd = open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // not every file system lets a directory be opened; the data is synced
  fsync(fd);
  close(fd);
}

// The temporaries' common prefix beside `target`: ".NAME.seqbench-"; each one continues
// with its writer's pid, a dash and mkostemp's six characters.
std::string TemporaryPrefix(const fs::path& target) {
  return "." + target.filename().string() + ".seqbench-";
}

// Removes the temporaries of `target` that a writer killed before its rename (kill -9, a
// power cut) left behind: regular files of the pattern whose writer's pid is gone. A live
// writer's temporary, or one whose pid was reused, stays; unlink never follows a link.
void RemoveOrphanedTemporaries(const fs::path& directory, const fs::path& target) {
  const std::string prefix = TemporaryPrefix(target);
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>-XXXXXX"
    const auto dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || rest.size() != dash + 7 ||
        rest.find_first_not_of("0123456789") != dash)
      continue;
    const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
    struct stat status {};
    if (lstat(it->path().c_str(), &status) != 0 || !S_ISREG(status.st_mode)) continue;
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      unlink(it->path().c_str());
  }
}

}  // namespace

void CheckOutputTarget(const std::string& path) { TargetMode(path); }

void WriteFileAtomically(const std::string& path, const std::string& content) {
  const mode_t mode = TargetMode(path);
  const fs::path target(path);
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // mkostemp opens with O_CREAT | O_EXCL: it never opens an existing path, symlink or not.
  std::string pattern =
      (directory / (TemporaryPrefix(target) + std::to_string(getpid()) + "-XXXXXX")).string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) throw WriteError(path, "creating a temporary file beside it", errno);
  TemporaryFile temporary(name.data());
  temporary.set_fd(fd);
  WriteAll(temporary, path, content);
  if (fchmod(temporary.fd(), mode) != 0) throw WriteError(path, "setting its mode", errno);
  if (fsync(temporary.fd()) != 0) throw WriteError(path, "syncing", errno);
  if (temporary.Close() != 0) throw WriteError(path, "closing", errno);
  if (std::rename(temporary.path().c_str(), path.c_str()) != 0) {
    throw WriteError(path, "renaming " + temporary.path() + " over it", errno);
  }
  temporary.Keep();
  SyncDirectory(directory);
  RemoveOrphanedTemporaries(directory, target);
}

void RefuseDatabaseOutput(const std::string& output, const std::string& database,
                          const std::string& flag) {
  if (output.empty() || output == "-" || database.empty()) return;
  std::error_code error;
  const fs::path out = fs::weakly_canonical(fs::absolute(output).lexically_normal(), error);
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string held = database + suffix;
    std::error_code same_error;
    // An existing file under another name (a hard link too), or the same path spelled
    // differently before the file exists.
    const bool same =
        fs::equivalent(output, held, same_error) ||
        (!error && out == fs::weakly_canonical(fs::absolute(held).lexically_normal(), same_error));
    if (same) {
      throw OutputRefused(flag + " " + output + " is the results database's own file " + held +
                          ": writing there would destroy its runs; choose another path");
    }
  }
}

namespace {
int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}
}  // namespace

bool WriteControlFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const ssize_t written = write(fd, text.data(), text.size());
  const bool closed = close(fd) == 0;
  return written == static_cast<ssize_t>(text.size()) && closed;
}

bool RemoveTree(const std::string& path) {
  struct stat status {};
  if (lstat(path.c_str(), &status) != 0) return errno == ENOENT;
  // Depth first, without following links, without crossing into other file systems.
  return nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0;
}

}  // namespace seqbench
