// The one way seqbench writes a file (README, plots, --out, exports): whole or not at all,
// never through a link someone planted, never over the results database. A file is
// written to a temporary that is created exclusively next to it (never an existing path,
// never through a symlink), synced, and renamed over the target; on any failure the
// target is exactly as it was and the temporary is gone. A writer killed before its
// rename (kill -9) leaves its temporary, named .NAME.seqbench-<pid>-XXXXXX; the next write
// of NAME removes those whose pid no longer runs.
//
// Thread-safety: stateless functions, safe from any thread. Two writers of one path each
// leave a whole file; the later rename wins.
#pragma once

#include <stdexcept>
#include <string>

namespace seqbench {

// An output path seqbench will not write to because of what it is (a symlink, a
// directory, the database): the user's to fix, so the command line exits 2 for it.
class OutputRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file the file system would not take (a full disk, a read-only mount, a permission):
// "cannot write PATH: step: reason". Also the user's to fix (free space, another path),
// so the command line exits 2 for it, as for std::filesystem's own errors.
class FileSystemError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes `content` to `path` atomically (above). Throws OutputRefused when `path` is a
// symbolic link or exists and is not a regular file, FileSystemError when creating,
// writing, syncing or renaming fails. The new file keeps an
// existing file's permission bits, else gets 0644.
void WriteFileAtomically(const std::string& path, const std::string& content);

// Throws OutputRefused where WriteFileAtomically(path, ...) would: for a writer that spends
// time or starts a process (gnuplot) before it has the content, so that the user's
// mistake is named first and nothing is started for it.
void CheckOutputTarget(const std::string& path);

// Throws OutputRefused when `output` names the SQLite database at `database` or a file
// SQLite keeps beside it (-wal, -shm, -journal), however spelled (relative, with `..`, or
// through a symlink): a report written there would destroy the runs it reports.
// `flag` names the option in the message.
void RefuseDatabaseOutput(const std::string& output, const std::string& database,
                          const std::string& flag = "--out");

// Writes `text` into an existing kernel control file (/proc/self/clear_refs): opened
// without creating, truncating or following a link, since such a file holds nothing to
// replace and procfs offers no rename. False when it cannot be opened or written.
bool WriteControlFile(const std::string& path, const std::string& text);

// Removes `path` and, if it is a folder, everything in it, never following a symbolic link
// (a link is removed, not what it names); a missing path is no error. Returns false if
// something could not be removed. Used instead of std::filesystem::remove_all, which
// crashed (SIGSEGV) in every call on the GPU machine's GCC 13 build against pip's LibTorch
// 2.11 (ci/gpu/README.md, second lease).
bool RemoveTree(const std::string& path);

}  // namespace seqbench
