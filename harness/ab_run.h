// Two builds in one job (seqbench ab): every case of a suite timed by a base binary and a
// new binary, each sample of one paired with a sample of the other taken as close in time
// as can be, so that whatever the machine does reaches both; `compare` then judges each
// case on the ratios of its pairs (stats::PairedRatioInterval), which cancel the drift
// that separates runs started minutes apart. What asv's `continuous
// --interleave-processes` and Chromium's Pinpoint do, at a finer grain.
//
// Lockstep (the default; harness/lockstep.h): one `BINARY run SUITE --lockstep PREFIX`
// worker a side, both alive at once, each setting up, checking and warming up every case,
// then timing one sample when told; the controller takes the pairs in a seeded interleaved
// order over the cases, the side that goes first a seeded coin per pair, so that the two
// samples of a pair are milliseconds apart. Process rounds (for a base binary without
// --lockstep): each round runs `BINARY run SUITE --repetitions 1 --in-process` once per
// side, in the order AbOrder gives; the first round checks every case, the later ones only
// time; a pair is then seconds apart. Either way the sides' scratch databases are gathered
// into two runs of the target database, linked to each other (environment entries
// ab_side, ab_pair = the other run's uuid, ab_order), sample r of a case paired with the
// other side's sample r. The machine's limits (harness/roofline.h) are measured once, by
// this process after both sides have ended, and replace those each side measured while its
// partner measured too.
//
// Thread-safety: RunAb blocks its thread until the last child is gone (in lockstep it
// supervises each worker on a thread of its own).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/child_run.h"
#include "results/store.h"

namespace seqbench {

// For each of `rounds` rounds, whether the base side runs first: a fair coin per round
// from std::mt19937_64(seed), so that neither side is always the one that runs second
// (after the other warmed the caches, or while a drift builds up), and the same order on
// every machine for one seed.
std::vector<bool> AbOrder(int64_t rounds, uint64_t seed);

struct AbRequest {
  std::string suite_path;
  std::string base_binary, new_binary;  // paths to the two seqbench executables
  int64_t rounds = 10;                  // samples per case and side (>= 6 for an interval)
  uint64_t seed = 1;
  // Both sides' `run` selects these cases, at these threads ("" and 0: the suite's).
  std::string filter;
  int64_t threads = 0;
  // The suite counts instructions ([measure] count): both sides get --count none (which
  // a base binary older than that flag does not know).
  bool suite_counts = false;
  // Test-only: the new side's steps slowed this much by whole extra steps (run
  // --test-slowdown), to measure what the paired gate catches; 0: off.
  double test_slowdown = 0;
  std::string label;  // the pair's runs are labelled "<label> base|new"
  // Seconds a side's process may take (process rounds), or a lockstep worker may take to
  // answer.
  double process_timeout_s = 3600;
  // Lockstep (harness/lockstep.h): one worker process a side, the two samples of a pair
  // taken back to back; false: process rounds, for a base binary without run --lockstep.
  bool lockstep = true;
};

// Side `side`'s ("base" or "new") `run` into its database in `scratch_dir`: `repetitions`
// samples a case, checked or not. RunAb starts it (a lockstep worker with --lockstep);
// ab checks the new side's before anything runs.
ChildRun AbSideRun(const AbRequest& request, const std::string& side,
                   const std::string& scratch_dir, bool check, int64_t repetitions);

struct AbProgress {
  int64_t round = 0, rounds = 0;      // process rounds: the 1-based round being run
  std::string side;                   // process rounds: "base" or "new"
  int64_t pairs_done = 0, pairs = 0;  // lockstep: sample pairs taken, of how many
};

struct AbResult {
  int64_t base_run_id = 0, new_run_id = 0;
  std::string order;  // "BN NB ...": the side that ran first, round by round (pair by pair)
};

// Runs the rounds (or the lockstep pairs) and stores the linked pair in `store`, each side
// with ab_started_at, when RunAb began (a pair's whole cost runs from there). Throws
// std::runtime_error naming the side, the round or what the worker failed at, and its
// output file's last line when a side's process fails (the scratch databases are kept in
// `scratch_dir` for a look), or when should_stop() asks.
AbResult RunAb(const AbRequest& request, Store& store, const std::string& scratch_dir,
               const std::function<void(const AbProgress&)>& on_progress,
               const std::function<bool()>& should_stop);

// The runs of one side gathered into one: the first round's record of each case (its
// correctness, memory, counts) with every round's samples in order and the runtime
// metrics recomputed over them. A case without exactly one sample in every round (it
// failed in one; adaptive stopping took more) keeps no samples, so that sample r is
// always round r, and says so in its message.
std::vector<CaseRecord> GatherRounds(const std::vector<std::vector<CaseRecord>>& rounds);

}  // namespace seqbench
