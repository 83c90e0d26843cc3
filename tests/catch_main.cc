// The Catch2 runner; kept in its own translation unit so that it compiles once.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
