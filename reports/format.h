// Human-readable numbers for terminal output and reports: durations with units chosen
// per value, byte counts, and mean ± std with digits trimmed to the noise.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace seqbench {

// 0.00321 -> "3.21 ms"; picks ns, µs, ms or s so that the number is in [1, 1000).
std::string FormatDuration(double seconds);
// (3.0147, 0.0362) -> "3.015 ± 0.036 s": a mean and its standard deviation in the mean's
// unit, both to the decimals that show the deviation to two significant figures (at least
// FormatDuration's for the mean, at most 4), as the seeds' tables read.
std::string FormatDurationSpread(double mean, double stddev);
// 1536 -> "1.5 KiB"; negative (unknown) -> "n/a".
std::string FormatBytes(int64_t bytes);
// 12775 -> "12.8k", 1234567 -> "1.23M", 950 -> "950": counts such as tokens/s.
std::string FormatCount(double value);
// 1234567 -> "1,234,567", -4500 -> "-4,500" (rounded to an integer): counts compared digit
// by digit, such as parameters.
std::string FormatExactCount(double value);
// 80 -> "1m20s", 3.2 -> "3s".
std::string FormatEta(double seconds);
// "2026-12-01T21:49:07Z" -> "2026-12-01": the day of a stored ISO-8601 timestamp.
std::string DayOf(const std::string& timestamp);
// A git SHA's first `length` characters (7 on chart axes, 10 in tables), or `when_empty`
// for a run that recorded none.
std::string ShortSha(const std::string& sha, size_t length, const std::string& when_empty);

}  // namespace seqbench
