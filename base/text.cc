#include "base/text.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>

namespace seqbench {

std::string ContentHash(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const unsigned char byte : text) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016" PRIx64, hash);
  return hex;
}

namespace {

bool StemCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

}  // namespace

std::string NameStem(const std::string& name) {
  std::string stem;
  bool exact = !name.empty() && name.size() <= 48;
  for (const char c : name) {
    exact = exact && StemCharacter(c);
    if (stem.size() < 32) stem += StemCharacter(c) ? c : '_';
  }
  if (exact) return name;
  return stem + "-" + ContentHash(name).substr(0, 8);
}

std::string FormatSignificant(double value, int digits) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
  return buffer;
}

}  // namespace seqbench
