#include "reports/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/text.h"

namespace seqbench {
namespace {

struct Unit {
  const char* name;
  double scale;  // seconds per unit
};

Unit DurationUnit(double seconds) {
  const double magnitude = std::fabs(seconds);
  if (magnitude >= 1) return {"s", 1};
  if (magnitude >= 1e-3) return {"ms", 1e-3};
  if (magnitude >= 1e-6) return {"us", 1e-6};
  return {"ns", 1e-9};
}

std::string Printf(const char* format, double a, int precision, const char* unit) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, precision, a, unit);
  return buffer;
}

}  // namespace

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds)) return FormatSignificant(seconds);  // "nan", "inf"
  const Unit unit = DurationUnit(seconds);
  const double value = seconds / unit.scale;
  const int decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return Printf("%.*f %s", value, decimals, unit.name);
}

std::string FormatDurationSpread(double mean, double stddev) {
  if (!std::isfinite(mean) || !std::isfinite(stddev)) {
    return FormatSignificant(mean) + " ± " + FormatSignificant(stddev);
  }
  const Unit unit = DurationUnit(mean);
  const double value = mean / unit.scale;
  const double spread = stddev / unit.scale;
  int decimals = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  if (spread > 0) {
    const int shown = 1 - static_cast<int>(std::floor(std::log10(spread)));
    decimals = std::min(4, std::max(decimals, shown));
  }
  char buffer[96];
  std::snprintf(buffer, sizeof(buffer), "%.*f ± %.*f %s", decimals, value, decimals, spread,
                unit.name);
  return buffer;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 0) return "n/a";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buffer;
}

std::string FormatEta(double seconds) {
  const int64_t total = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buffer[32];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof(buffer), "%lldh%02lldm", (long long)(total / 3600),
                  (long long)(total % 3600 / 60));
  } else if (total >= 60) {
    std::snprintf(buffer, sizeof(buffer), "%lldm%02llds", (long long)(total / 60),
                  (long long)(total % 60));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%llds", (long long)total);
  }
  return buffer;
}

std::string FormatCount(double value) {
  if (!std::isfinite(value)) return FormatSignificant(value);
  const double magnitude = std::abs(value);
  if (magnitude >= 1e9) return FormatSignificant(value / 1e9) + "G";
  if (magnitude >= 1e6) return FormatSignificant(value / 1e6) + "M";
  if (magnitude >= 1e3) return FormatSignificant(value / 1e3) + "k";
  return FormatSignificant(value);
}

std::string FormatExactCount(double value) {
  if (!std::isfinite(value)) return FormatSignificant(value);
  const long long rounded = std::llround(value);
  std::string digits = std::to_string(rounded < 0 ? -rounded : rounded);
  for (auto at = static_cast<int64_t>(digits.size()) - 3; at > 0; at -= 3) digits.insert(at, ",");
  return (rounded < 0 ? "-" : "") + digits;
}

std::string DayOf(const std::string& timestamp) { return timestamp.substr(0, 10); }

std::string ShortSha(const std::string& sha, size_t length, const std::string& when_empty) {
  return sha.empty() ? when_empty : sha.substr(0, length);
}

}  // namespace seqbench
