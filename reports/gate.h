// The gate's measured power: how often `compare` raises a false alarm between runs of one
// unchanged binary, and how often it catches a known slowdown (run --test-slowdown, or
// extra work in the shared head, run --test-extra-head-passes), under the time or the
// counts gate, from
// runs stored with labels "<prefix> base" and "<prefix> x<factor>" (ci/measure_gate). A
// README section `gate=<prefix> suite=<suite>` renders it, so that the figures in
// reports/README.md come from stored runs, not from typing. And its verdicts on pairs of
// real commits against what their diffs led a reader to expect (`commits=... suite=S`).
//
// Thread-safety: reads the store; one thread at a time per Store.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/compare.h"
#include "results/store.h"

namespace seqbench {

// The compares of one kind (base against base, or base against a slowed run).
struct GateRow {
  std::string what;  // "no change (base i against base i+1)", "1.3x slower"
  int compares = 0;  // pairs of runs compared
  int flagged = 0;   // compares that fail (exit 1: a case slower or larger)
  int cases = 0;     // case comparisons over all compares
  int slower = 0, faster = 0, same = 0, ambiguous = 0;  // time verdicts
  // Counted instructions' verdicts (runs with run --count).
  int more = 0, fewer = 0, same_count = 0, ambiguous_count = 0, uncounted = 0;
  int nondeterministic = 0;  // flagged, whatever their verdict
  // A/B pairs: each pair's wall time to the later finish, from ab's start (ab_started_at)
  // where the pair records it, else from its base run's start (which leaves out ab's and
  // its workers' start-up and the machine-limit measurement).
  std::vector<double> pair_wall_s;
};

// Each base run compared with the next base run of the same commit; each slowed run with
// the base run just before it of the same commit (its round), each base run at most once
// per factor; labels whose factor is not a finite number >= 1 are ignored. Throws
// std::invalid_argument when there are fewer than 2 base runs.
// A compare is flagged as `compare --gate gate` would exit 1.
std::vector<GateRow> MeasureGate(const Store& store, const std::string& suite,
                                 const std::string& prefix, const CompareSettings& settings,
                                 Gate gate = Gate::kTime);

// The paired gate's measured power: every A/B pair (seqbench ab) of `suite` whose base
// run is labelled "<prefix> base", judged as compare judges a pair, one row per slowdown
// of the new side (its test_slowdown entry; none: an unchanged pair, A/A). Throws
// std::invalid_argument when there is no such pair.
std::vector<GateRow> MeasureAbGate(const Store& store, const std::string& suite,
                                   const std::string& prefix, CompareSettings settings);

// The wall time of each complete run of `suite` labelled `label`, from its start to its
// finish as stored: what an A/B pair costs is set against it (ci/measure_gate ab stores
// runs of the suite alone, as CI runs it, labelled "<prefix> solo").
std::vector<double> RunWallTimes(const Store& store, const std::string& suite,
                                 const std::string& label);

// A Markdown table of the rows, with the threshold and confidence they were judged at: the
// time verdicts under the time gate, the counts' under the counts gate, both under both;
// for A/B pairs, the median wall time of a pair.
std::string RenderGateTable(const std::vector<GateRow>& rows, const CompareSettings& settings,
                            Gate gate = Gate::kTime);

// One pair of commits of this repository's history that the counts gate judged
// (ci/measure_gate_pairs), and what the pair's diff led the person who labelled it to
// expect before any verdict was seen: "same", "more", "fewer", "mixed" (both ways) or
// "moved" (either way, its direction not predictable from the diff).
struct CommitPair {
  std::string base, head;  // SHA prefixes of the runs' git_sha
  std::string expected;
};

// The pairs of a README section's `pairs=B..H:expected,B..H:expected` attribute. Throws
// std::invalid_argument naming the entry that is not of that shape, or whose expectation
// is none of the five.
std::vector<CommitPair> ParseCommitPairs(const std::string& text);

// The counts gate's verdict on one pair: the newest complete run of the suite at its base
// commit against the newest at its head, as `compare --gate counts` judges them.
struct CommitPairRow {
  CommitPair pair;
  GateRow verdicts;      // this one compare's case verdicts, and whether it was flagged
  GeometricMean counts;  // of the cases' instruction ratios
  // same | more | fewer | mixed (cases moved both ways) | ambiguous (none moved past the
  // threshold, some reach across it) | not comparable (the counting toolchains differ).
  std::string observed;
  bool agrees = false;  // observed is what was expected ("moved": more, fewer or mixed)
  // The two counting runs' wall times, start to finish as stored (their builds are not
  // in the store: ci/measure_gate_pairs prints them).
  std::optional<double> count_wall_s;
};

// Each pair's row, in the given order. Throws std::invalid_argument when a commit has no
// complete run of `suite` in the store.
std::vector<CommitPairRow> MeasureCommitPairs(const Store& store, const std::string& suite,
                                              const std::vector<CommitPair>& pairs,
                                              const CompareSettings& settings);

// A Markdown table, a row a pair, with the threshold its verdicts were judged at and how
// many verdicts agreed with their labels.
std::string RenderCommitPairTable(const std::vector<CommitPairRow>& rows,
                                  const CompareSettings& settings);

}  // namespace seqbench
